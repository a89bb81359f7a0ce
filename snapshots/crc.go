package snapshots

// The CRC-32C of a concatenation can be computed from the CRCs of its
// parts: crc(A‖B) is crc(A) multiplied by x^(8·len(B)) modulo the
// polynomial, plus crc(B), in GF(2) (the pre- and post-inversion of the
// register cancel out). ReadTaskStateHead uses it to check the bytes it
// reads around key-group sections it does not read against the CRC-32C of
// the whole object.

// castagnoliReversed is the Castagnoli polynomial in the reflected bit
// order of hash/crc32, where the highest bit is x^0.
const castagnoliReversed = 0x82f63b78

// mulModP returns a·b modulo the Castagnoli polynomial, both in reflected
// bit order.
func mulModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReversed
		} else {
			b >>= 1
		}
	}
	return p
}

// powers[k] is x^(2^k) modulo the polynomial.
var powers = func() (t [64]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = mulModP(p, p)
	}
	return t
}()

// shiftBytes returns x^(8·n) modulo the polynomial: what appending n bytes
// multiplies a CRC by.
func shiftBytes(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulModP(powers[k], p)
		}
	}
	return p
}

// crcCombine returns the CRC-32C of A‖B from crcA, the CRC-32C of A, and
// crcB, that of B, of lenB bytes.
func crcCombine(crcA, crcB uint32, lenB uint64) uint32 {
	return mulModP(shiftBytes(lenB), crcA) ^ crcB
}
