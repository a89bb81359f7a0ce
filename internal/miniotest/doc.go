// Package miniotest runs real MinIO servers for tests.
//
// [Start] launches `minio server` as a child process on free loopback
// ports, with a fresh data directory and random root credentials, waits
// until it is live and stops it when the test ends:
//
//	func TestX(t *testing.T) {
//		srv := miniotest.Start(t)
//		store := srv.Store(t, "bucket", "prefix")
//		...
//	}
//
// The server binary comes from [Binary]: $MINIO_BIN, `minio` on PATH, or
// .tools/bin/minio in the repository (`make minio-bin` builds it). When
// there is none, tests are skipped, except with CI=true, where they fail:
// MinIO tests must never be skipped silently in CI.
package miniotest
