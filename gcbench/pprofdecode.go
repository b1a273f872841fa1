package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// A hand-written reader of the one thing costlab needs from a runtime/pprof CPU profile:
// each sample's stack of PCs. The profile is a gzipped protobuf
// (github.com/google/pprof/proto/profile.proto); only the standard library may be used, so
// the few fields read are decoded here: Profile.sample (2) with Sample.location_id (1) and
// Sample.value (2), and Profile.location (4) with Location.id (1) and Location.address (3).
// Everything else is skipped by wire type.

// StackCount is how many samples had this stack: PCs[0] is the leaf (the instruction the
// sample hit), the rest its callers, innermost first (each inside its call instruction).
type StackCount struct {
	PCs   []uint64
	Count int64
}

// ProfileStacks decodes a gzipped (or plain) CPU profile and returns its samples' stacks
// with their counts, in the profile's order, and the total sample count. costlab
// classifies them (which frames are the collector's, which instruction the leaf is).
func ProfileStacks(data []byte) ([]StackCount, int64, error) {
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, 0, fmt.Errorf("profile: %w", err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			return nil, 0, fmt.Errorf("profile: %w", err)
		}
		data = raw
	}
	type sample struct {
		locs  []uint64
		count int64
	}
	var samples []sample
	addr := map[uint64]uint64{}
	err := eachField(data, func(field int, wire int, v uint64, body []byte) error {
		switch {
		case field == 2 && wire == 2: // Sample
			var locs []uint64
			var vals []int64
			err := eachField(body, func(f, w int, v uint64, b []byte) error {
				switch {
				case f == 1 && w == 0:
					locs = append(locs, v)
				case f == 1 && w == 2:
					return packed(b, func(x uint64) { locs = append(locs, x) })
				case f == 2 && w == 0:
					vals = append(vals, int64(v))
				case f == 2 && w == 2:
					return packed(b, func(x uint64) { vals = append(vals, int64(x)) })
				}
				return nil
			})
			if err != nil {
				return err
			}
			if len(locs) == 0 || len(vals) == 0 {
				return nil
			}
			samples = append(samples, sample{locs, vals[0]})
		case field == 4 && wire == 2: // Location
			var id, a uint64
			err := eachField(body, func(f, w int, v uint64, _ []byte) error {
				if w == 0 && f == 1 {
					id = v
				} else if w == 0 && f == 3 {
					a = v
				}
				return nil
			})
			if err != nil {
				return err
			}
			addr[id] = a
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	out := make([]StackCount, 0, len(samples))
	var total int64
	for _, s := range samples {
		pcs := make([]uint64, len(s.locs))
		for i, id := range s.locs {
			a, ok := addr[id]
			if !ok {
				return nil, 0, fmt.Errorf("profile: sample names location %d, which is not in the profile", id)
			}
			pcs[i] = a
		}
		out = append(out, StackCount{PCs: pcs, Count: s.count})
		total += s.count
	}
	return out, total, nil
}

var errTruncated = errors.New("profile: truncated protobuf")

func uvarint(b []byte) (uint64, int, error) {
	var x uint64
	for i := 0; i < len(b) && i < 10; i++ {
		x |= uint64(b[i]&0x7f) << (7 * uint(i))
		if b[i] < 0x80 {
			return x, i + 1, nil
		}
	}
	return 0, 0, errTruncated
}

// eachField calls f for every field of a message: its number, wire type, and the varint
// value (wire 0) or the bytes (wire 2). Fixed 32/64-bit fields are skipped.
func eachField(b []byte, f func(field, wire int, v uint64, body []byte) error) error {
	for len(b) > 0 {
		key, n, err := uvarint(b)
		if err != nil {
			return err
		}
		b = b[n:]
		field, wire := int(key>>3), int(key&7)
		switch wire {
		case 0:
			v, n, err := uvarint(b)
			if err != nil {
				return err
			}
			b = b[n:]
			if err := f(field, wire, v, nil); err != nil {
				return err
			}
		case 1:
			if len(b) < 8 {
				return errTruncated
			}
			b = b[8:]
		case 2:
			l, n, err := uvarint(b)
			if err != nil {
				return err
			}
			b = b[n:]
			if uint64(len(b)) < l {
				return errTruncated
			}
			if err := f(field, wire, 0, b[:l]); err != nil {
				return err
			}
			b = b[l:]
		case 5:
			if len(b) < 4 {
				return errTruncated
			}
			b = b[4:]
		default:
			return fmt.Errorf("profile: unknown wire type %d", wire)
		}
	}
	return nil
}

func packed(b []byte, f func(uint64)) error {
	for len(b) > 0 {
		v, n, err := uvarint(b)
		if err != nil {
			return err
		}
		f(v)
		b = b[n:]
	}
	return nil
}
