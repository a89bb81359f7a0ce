package cluster

import "github.com/snapflow/snapflow/internal/nodeauth"

// ErrSecretFile is wrapped by ReadSecretFile's and CreateSecretFile's
// refusal of a file or directory that is not the user's own and private.
var ErrSecretFile = nodeauth.ErrSecretFile

// ReadSecretFile reads the cluster's secret (Coordinator.Secret,
// Worker.Secret) from path, as ssh reads a private key: only when the file
// is owned by this process's user and its group and others have no access
// to it (mode 0600 or 0400). Any other file is refused with an error that
// names it, its mode and its owner: another local user who made the file
// first would have chosen the cluster's secret.
func ReadSecretFile(path string) (string, error) { return nodeauth.ReadSecretFile(path) }

// CreateSecretFile writes a new random secret to path, which must not
// exist, mode 0600, making its directory mode 0700 when it does not exist,
// and returns the secret. A directory that its group or others may write
// (such as /tmp) is refused: keep the secret in a private directory.
func CreateSecretFile(path string) (string, error) { return nodeauth.CreateSecretFile(path) }
