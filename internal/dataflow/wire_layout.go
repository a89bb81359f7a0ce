package dataflow

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"sync"
	"unsafe"
)

// The default wire codec encodes "flat" types in a binary layout computed
// once per type by reflection: booleans, numbers, strings, byte slices, and
// slices, arrays and structs of them. The wire is never persisted and every
// node runs the same binary, so the layout is not versioned; it is the same
// on every platform (little-endian numbers; int, uint and uintptr in 8
// bytes), so that nodes of different architectures interoperate.
//
// A value's encoding is its fields in declaration order, blank fields
// skipped:
//
//   - a fixed-size number: its bytes, little-endian; a bool: 0 or 1;
//   - a string: uvarint length, then its bytes;
//   - a slice: uvarint 0 for nil, else uvarint length+1, then its elements
//     (the bytes of a byte slice);
//   - an array: its elements.
//
// A string that ends a record is stored without its length: the record's
// end bounds it. On little-endian platforms, runs of numbers adjacent in
// memory are copied as one block, and the batches of a type that is nothing
// but such a run (int64, a struct of int64 pairs) are copied whole.
//
// Pointers, maps, interfaces, channels, functions and complex numbers make a
// type not flat: it is encoded by DefaultCodec (JSON) instead.

// opKind is what one step of a layout encodes.
type opKind uint8

const (
	opRaw        opKind = iota + 1 // n bytes copied as they are in memory (little-endian platforms)
	opBool                         // one byte, 0 or 1
	op1                            // 1-byte number
	op2                            // 2-byte number, little-endian
	op4                            // 4-byte number, little-endian
	op8                            // 8-byte number, little-endian
	opInt32As64                    // int on a 32-bit platform, stored in 8 bytes
	opUint32As64                   // uint or uintptr on a 32-bit platform, stored in 8 bytes
	opString                       // uvarint length, bytes
	opStringTail                   // bytes up to the end of the record
	opBytes                        // uvarint 0 (nil) or length+1, bytes
	opSlice                        // uvarint 0 (nil) or length+1, elements
	opArray                        // n elements
)

// wireOp encodes the part of a value at offset off.
type wireOp struct {
	kind opKind
	off  uintptr
	n    int          // opRaw: bytes; opArray: elements
	elem *layout      // opSlice, opArray: the element's layout
	typ  reflect.Type // opSlice: the slice type, to allocate it
	path string       // the field, for errors ("" for the value itself)
}

// layout is how values of one flat type are encoded.
type layout struct {
	ops  []wireOp
	size uintptr // the type's size: the stride of a slice of it
	// min is the fewest bytes a value encodes to.
	min int
	// packed says that the wire form of a value is its memory, with no
	// padding: batches are copied whole.
	packed bool
}

// littleEndian says whether numbers are little-endian in memory, as on the
// wire.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// layouts caches layoutOf by type.
var layouts sync.Map // reflect.Type -> *layout (nil: not flat)

// layoutOf returns the layout of the records of type t, or nil when t is
// not flat.
func layoutOf(t reflect.Type) *layout {
	if l, ok := layouts.Load(t); ok {
		return l.(*layout)
	}
	l := buildLayout(t, map[reflect.Type]bool{})
	if l != nil {
		if n := len(l.ops); n > 0 && l.ops[n-1].kind == opString {
			// The record's end bounds its last string.
			tail := *l
			tail.ops = append([]wireOp(nil), l.ops...)
			tail.ops[n-1].kind = opStringTail
			tail.min--
			l = &tail
		}
	}
	got, _ := layouts.LoadOrStore(t, l)
	return got.(*layout)
}

// buildLayout returns the layout of t, or nil when t is not flat. visiting
// holds the slice element types being built, to refuse recursive types.
func buildLayout(t reflect.Type, visiting map[reflect.Type]bool) *layout {
	l := &layout{size: t.Size()}
	if !l.add(t, 0, "", visiting) {
		return nil
	}
	if littleEndian {
		l.mergeRaw()
	}
	l.packed = len(l.ops) == 1 && l.ops[0].kind == opRaw && l.ops[0].off == 0 && uintptr(l.ops[0].n) == l.size
	return l
}

// add appends the ops of a value of type t at offset off, and reports
// whether t is flat.
func (l *layout) add(t reflect.Type, off uintptr, path string, visiting map[reflect.Type]bool) bool {
	fixed := func(k opKind, n int) bool {
		l.ops = append(l.ops, wireOp{kind: k, off: off, n: n, path: path})
		l.min += n
		return true
	}
	switch t.Kind() {
	case reflect.Bool:
		return fixed(opBool, 1)
	case reflect.Int8, reflect.Uint8:
		return fixed(op1, 1)
	case reflect.Int16, reflect.Uint16:
		return fixed(op2, 2)
	case reflect.Int32, reflect.Uint32, reflect.Float32:
		return fixed(op4, 4)
	case reflect.Int64, reflect.Uint64, reflect.Float64:
		return fixed(op8, 8)
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		switch {
		case t.Size() == 8:
			return fixed(op8, 8)
		case t.Kind() == reflect.Int:
			return fixed(opInt32As64, 8)
		}
		return fixed(opUint32As64, 8)
	case reflect.String:
		return fixed(opString, 1)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return fixed(opBytes, 1)
		}
		if visiting[t] {
			return false // a recursive slice type
		}
		visiting[t] = true
		elem := buildLayout(t.Elem(), visiting)
		delete(visiting, t)
		if elem == nil || elem.min == 0 {
			// Zero-size elements would let a corrupt length ask for any
			// number of them; such slices are left to JSON.
			return false
		}
		l.ops = append(l.ops, wireOp{kind: opSlice, off: off, elem: elem, typ: t, path: path})
		l.min++
		return true
	case reflect.Array:
		if t.Len() == 0 {
			return true
		}
		elem := buildLayout(t.Elem(), visiting)
		if elem == nil {
			return false
		}
		if elem.packed {
			return fixed(opRaw, int(t.Size()))
		}
		l.ops = append(l.ops, wireOp{kind: opArray, off: off, n: t.Len(), elem: elem, path: path})
		l.min += t.Len() * elem.min
		return true
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Name == "_" {
				continue // blank fields hold no data
			}
			p := f.Name
			if path != "" {
				p = path + "." + f.Name
			}
			if !l.add(f.Type, off+f.Offset, p, visiting) {
				return false
			}
		}
		return true
	}
	return false
}

// mergeRaw turns runs of numbers that are adjacent in memory into block
// copies. Only for little-endian platforms, whose memory is the wire form.
func (l *layout) mergeRaw() {
	out := l.ops[:0]
	for _, op := range l.ops {
		switch op.kind {
		case op1, op2, op4, op8:
			op.kind = opRaw
		}
		if n := len(out); n > 0 && op.kind == opRaw && out[n-1].kind == opRaw && out[n-1].off+uintptr(out[n-1].n) == op.off {
			out[n-1].n += op.n
			continue
		}
		out = append(out, op)
	}
	l.ops = out
}

// appendValue appends the encoding of the value at p.
func (l *layout) appendValue(dst []byte, p unsafe.Pointer) []byte {
	for i := range l.ops {
		op := &l.ops[i]
		q := unsafe.Add(p, op.off)
		switch op.kind {
		case opRaw:
			dst = append(dst, unsafe.Slice((*byte)(q), op.n)...)
		case opBool, op1:
			dst = append(dst, *(*byte)(q))
		case op2:
			dst = binary.LittleEndian.AppendUint16(dst, *(*uint16)(q))
		case op4:
			dst = binary.LittleEndian.AppendUint32(dst, *(*uint32)(q))
		case op8:
			dst = binary.LittleEndian.AppendUint64(dst, *(*uint64)(q))
		case opInt32As64:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(int64(*(*int32)(q))))
		case opUint32As64:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(*(*uint32)(q)))
		case opString:
			s := *(*string)(q)
			dst = binary.AppendUvarint(dst, uint64(len(s)))
			dst = append(dst, s...)
		case opStringTail:
			dst = append(dst, *(*string)(q)...)
		case opBytes:
			b := *(*[]byte)(q)
			if b == nil {
				dst = append(dst, 0)
				continue
			}
			dst = binary.AppendUvarint(dst, uint64(len(b))+1)
			dst = append(dst, b...)
		case opSlice:
			h := (*sliceHeader)(q)
			if h.data == nil {
				dst = append(dst, 0)
				continue
			}
			dst = binary.AppendUvarint(dst, uint64(h.len)+1)
			for j := range h.len {
				dst = op.elem.appendValue(dst, unsafe.Add(h.data, uintptr(j)*op.elem.size))
			}
		case opArray:
			for j := range op.n {
				dst = op.elem.appendValue(dst, unsafe.Add(q, uintptr(j)*op.elem.size))
			}
		}
	}
	return dst
}

// decodeValue decodes a value from the start of b into p, which holds the
// zero value, and returns the rest of b. Strings and slices are copied out
// of b.
func (l *layout) decodeValue(b []byte, p unsafe.Pointer) ([]byte, error) {
	for i := range l.ops {
		op := &l.ops[i]
		q := unsafe.Add(p, op.off)
		var err error
		switch op.kind {
		case opRaw:
			if len(b) < op.n {
				return nil, op.short(op.n, b)
			}
			copy(unsafe.Slice((*byte)(q), op.n), b)
			b = b[op.n:]
		case opBool, op1, op2, op4, op8:
			b, err = op.decodeNumber(b, q)
		case opInt32As64, opUint32As64:
			b, err = op.decodeNarrow(b, q)
		case opString:
			var s []byte
			if s, b, err = op.lengthPrefixed(b, 0); err == nil {
				*(*string)(q) = string(s)
			}
		case opStringTail:
			*(*string)(q) = string(b)
			b = b[len(b):]
		case opBytes:
			var s []byte
			if s, b, err = op.lengthPrefixed(b, 1); err == nil && s != nil {
				*(*[]byte)(q) = append(make([]byte, 0, len(s)), s...)
			}
		case opSlice:
			b, err = op.decodeSlice(b, q)
		case opArray:
			for j := 0; j < op.n && err == nil; j++ {
				b, err = op.elem.decodeValue(b, unsafe.Add(q, uintptr(j)*op.elem.size))
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// short describes a value cut short.
func (op *wireOp) short(want int, b []byte) error {
	return op.errorf("%d bytes left, want %d", len(b), want)
}

func (op *wireOp) errorf(format string, args ...any) error {
	if op.path == "" {
		return fmt.Errorf(format, args...)
	}
	return fmt.Errorf("field %s: "+format, append([]any{op.path}, args...)...)
}

func (op *wireOp) decodeNumber(b []byte, q unsafe.Pointer) ([]byte, error) {
	n := 1
	switch op.kind {
	case op2:
		n = 2
	case op4:
		n = 4
	case op8:
		n = 8
	}
	if len(b) < n {
		return nil, op.short(n, b)
	}
	switch op.kind {
	case opBool:
		if b[0] > 1 {
			return nil, op.errorf("byte %d is not a bool", b[0])
		}
		*(*byte)(q) = b[0]
	case op1:
		*(*byte)(q) = b[0]
	case op2:
		*(*uint16)(q) = binary.LittleEndian.Uint16(b)
	case op4:
		*(*uint32)(q) = binary.LittleEndian.Uint32(b)
	case op8:
		*(*uint64)(q) = binary.LittleEndian.Uint64(b)
	}
	return b[n:], nil
}

// decodeNarrow decodes 8 bytes into a 32-bit int, uint or uintptr, refusing
// a value that does not fit.
func (op *wireOp) decodeNarrow(b []byte, q unsafe.Pointer) ([]byte, error) {
	if len(b) < 8 {
		return nil, op.short(8, b)
	}
	u := binary.LittleEndian.Uint64(b)
	if op.kind == opInt32As64 {
		if v := int64(u); v != int64(int32(v)) {
			return nil, op.errorf("%d does not fit in 32 bits", v)
		}
	} else if u != uint64(uint32(u)) {
		return nil, op.errorf("%d does not fit in 32 bits", u)
	}
	*(*uint32)(q) = uint32(u)
	return b[8:], nil
}

// lengthPrefixed reads a uvarint length, minus bias (1 when 0 means nil),
// and that many bytes. It returns nil bytes for a nil slice, and non-nil
// ones otherwise.
func (op *wireOp) lengthPrefixed(b []byte, bias uint64) (s, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, op.errorf("bad length")
	}
	b = b[k:]
	if n < bias {
		return nil, b, nil
	}
	n -= bias
	if n > uint64(len(b)) {
		return nil, nil, op.errorf("length %d, beyond the %d bytes left", n, len(b))
	}
	return b[:n:n], b[n:], nil
}

// decodeSlice decodes a slice of a flat element type into q.
func (op *wireOp) decodeSlice(b []byte, q unsafe.Pointer) ([]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, op.errorf("bad length")
	}
	b = b[k:]
	if n == 0 {
		return b, nil // nil
	}
	n--
	if n > uint64(len(b)/op.elem.min) {
		return nil, op.errorf("%d elements, more than the %d bytes left can hold", n, len(b))
	}
	s := reflect.MakeSlice(op.typ, int(n), int(n))
	data := s.UnsafePointer()
	var err error
	for j := 0; j < int(n) && err == nil; j++ {
		b, err = op.elem.decodeValue(b, unsafe.Add(data, uintptr(j)*op.elem.size))
	}
	if err != nil {
		return nil, err
	}
	reflect.NewAt(op.typ, q).Elem().Set(s)
	return b, nil
}
