package main

import (
	"errors"
	"fmt"
	"strconv"
)

// The input is orders: order id i (0..records-1) is for customer
// customerOf(i) and worth amountOf(i) cents. Both are fixed functions of i,
// so that the expected output is known without reading the input back.
//
// An input record's key is the customer and its value "id,customer,amount"
// (text, so that kafka-console-consumer shows it). Records with the same
// key go to the same partition, in the order they were produced, so each
// customer's orders reach the job in id order, and the running total after
// each order is known in advance.
//
// The job emits one effect per order: key the customer, value
// "id,customer,count,total", the customer's number of orders and total in
// cents after this one.

// order is an input record.
type order struct {
	ID, Customer, Amount int64
}

// effect is what the job emits for one order.
type effect struct {
	ID, Customer, Count, Total int64
}

// mix is the splitmix64 finaliser: it spreads ids over customers and
// amounts.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func customerOf(id, customers int64) int64 { return int64(mix(uint64(id)) % uint64(customers)) }

func amountOf(id int64) int64 { return 1 + int64(mix(uint64(id)^0x5bd1e995)%10_000) }

func orderOf(id, customers int64) order {
	return order{ID: id, Customer: customerOf(id, customers), Amount: amountOf(id)}
}

// encodeOrder returns an input record's key and value.
func encodeOrder(o order) (key, value []byte) {
	key = strconv.AppendInt(nil, o.Customer, 10)
	value = make([]byte, 0, 32)
	value = strconv.AppendInt(value, o.ID, 10)
	value = append(value, ',')
	value = strconv.AppendInt(value, o.Customer, 10)
	value = append(value, ',')
	value = strconv.AppendInt(value, o.Amount, 10)
	return key, value
}

// encodeEffect returns an output record's key and value.
func encodeEffect(e effect) (key, value []byte) {
	key = strconv.AppendInt(nil, e.Customer, 10)
	value = make([]byte, 0, 40)
	value = strconv.AppendInt(value, e.ID, 10)
	value = append(value, ',')
	value = strconv.AppendInt(value, e.Customer, 10)
	value = append(value, ',')
	value = strconv.AppendInt(value, e.Count, 10)
	value = append(value, ',')
	value = strconv.AppendInt(value, e.Total, 10)
	return key, value
}

// errMalformed is wrapped by the errors of decodeOrder and decodeEffect.
var errMalformed = errors.New("malformed record")

// decodeOrder parses an input record's value.
func decodeOrder(value []byte) (order, error) {
	var f [3]int64
	if err := fields(value, f[:]); err != nil {
		return order{}, fmt.Errorf("order %q: %w", value, err)
	}
	return order{ID: f[0], Customer: f[1], Amount: f[2]}, nil
}

// decodeEffect parses an output record's value.
func decodeEffect(value []byte) (effect, error) {
	var f [4]int64
	if err := fields(value, f[:]); err != nil {
		return effect{}, fmt.Errorf("effect %q: %w", value, err)
	}
	return effect{ID: f[0], Customer: f[1], Count: f[2], Total: f[3]}, nil
}

// fields parses len(out) comma-separated non-negative decimal numbers,
// without allocating.
func fields(b []byte, out []int64) error {
	i := 0
	for k := range out {
		start := i
		var n int64
		for ; i < len(b) && b[i] != ','; i++ {
			c := b[i]
			if c < '0' || c > '9' || n > (1<<62)/10 {
				return fmt.Errorf("%w: field %d is not a number", errMalformed, k+1)
			}
			n = n*10 + int64(c-'0')
		}
		if i == start {
			return fmt.Errorf("%w: field %d is empty", errMalformed, k+1)
		}
		out[k] = n
		if k < len(out)-1 {
			if i == len(b) {
				return fmt.Errorf("%w: %d fields, want %d", errMalformed, k+1, len(out))
			}
			i++ // the comma
		}
	}
	if i != len(b) {
		return fmt.Errorf("%w: more than %d fields", errMalformed, len(out))
	}
	return nil
}

// expected returns, for every order, the effect the job must emit for it:
// the customer's count and running total after its orders in id order.
func expected(records, customers int64) []effect {
	out := make([]effect, records)
	count := make([]int64, customers)
	total := make([]int64, customers)
	for id := range records {
		o := orderOf(id, customers)
		count[o.Customer]++
		total[o.Customer] += o.Amount
		out[id] = effect{ID: id, Customer: o.Customer, Count: count[o.Customer], Total: total[o.Customer]}
	}
	return out
}
