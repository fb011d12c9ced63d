// Package wire encodes Go values in a compact binary form for the
// launcher's own files and digests (the plan cache, the review walk's
// index, the plan key): every exported field (but those tagged
// `wire:"-"`), followed through pointers,
// slices, arrays and maps with string keys, in the order of the type's
// declaration. The encoding carries no type information, so it is read
// back only into the type it was written from, by a build whose types are
// the same (the launcher keys its files by its own binary). Decoding is
// strict, so every value has one encoding: a value cut short, a byte too
// many, a length past the end, a number written longer than it needs or
// out of its type's range, and map keys out of order are errors.
//
// It exists because encoding/json, in the fresh process every run starts,
// spent milliseconds building its codecs by reflection before it encoded
// anything (DESIGN.md amendments, "Start-up").
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Layout, per kind: a bool, an unsigned number, a float's bits, a
// pointer's presence (0 nil, 1 then the value) as uvarints; a signed
// number as a varint; a string as its length and bytes; a slice, an
// array or a map as 0 when nil, else its length plus one, then its items
// (a []byte as its bytes; a map's items as key and value, keys sorted); a
// struct as its exported fields in order, but those tagged `wire:"-"`
// (derived from the others: not encoded, and left zero by Decode).

// ErrMalformed is what Decode returns for bytes Append did not write for
// the type.
var ErrMalformed = errors.New("wire: malformed")

// Append appends v's encoding to b.
func Append(b []byte, v any) ([]byte, error) {
	e := encoder{b: b}
	err := e.value(reflect.ValueOf(v))
	return e.b, err
}

// Write writes v's encoding to w in pieces of some kilobytes (a digest of
// a large value needs no buffer as large).
func Write(w io.Writer, v any) error {
	e := encoder{b: make([]byte, 0, 2*flushAt), w: w}
	err := e.value(reflect.ValueOf(v))
	if err == nil {
		_, err = w.Write(e.b)
	}
	return err
}

const flushAt = 4 << 10

// Decode decodes b, all of it, into the value v points to, which must be
// of the type Append was given (a *T encoded is decoded into a **T).
func Decode(b []byte, v any) error {
	p := reflect.ValueOf(v)
	if p.Kind() != reflect.Pointer || p.IsNil() {
		return fmt.Errorf("wire: decoding into %T, not a pointer", v)
	}
	d := decoder{b: b}
	if err := d.value(p.Elem()); err != nil {
		return err
	}
	if len(d.b) != 0 {
		return ErrMalformed
	}
	return nil
}

// exported are the indexes of a struct type's exported fields.
var exported sync.Map // reflect.Type -> []int

func fieldsOf(t reflect.Type) []int {
	if f, ok := exported.Load(t); ok {
		return f.([]int)
	}
	var f []int
	for i := range t.NumField() {
		if sf := t.Field(i); sf.IsExported() && sf.Tag.Get("wire") != "-" {
			f = append(f, i)
		}
	}
	exported.Store(t, f)
	return f
}

type encoder struct {
	b []byte
	w io.Writer // nil: everything stays in b
}

func (e *encoder) num(x uint64) { e.b = binary.AppendUvarint(e.b, x) }

func (e *encoder) bytes(s string) {
	e.num(uint64(len(s)))
	e.b = append(e.b, s...)
	if e.w != nil && len(e.b) >= flushAt {
		e.w.Write(e.b)
		e.b = e.b[:0]
	}
}

func (e *encoder) value(v reflect.Value) error {
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			e.num(1)
		} else {
			e.num(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.b = binary.AppendVarint(e.b, v.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.num(v.Uint())
	case reflect.Float32, reflect.Float64:
		e.num(math.Float64bits(v.Float()))
	case reflect.String:
		e.bytes(v.String())
	case reflect.Pointer:
		if v.IsNil() {
			e.num(0)
			return nil
		}
		e.num(1)
		return e.value(v.Elem())
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			e.num(0)
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Kind() == reflect.Slice {
				e.num(uint64(v.Len()) + 1)
				e.b = append(e.b, v.Bytes()...)
				return nil
			}
			e.num(uint64(v.Len()) + 1)
			for i := range v.Len() {
				e.b = append(e.b, byte(v.Index(i).Uint()))
			}
			return nil
		}
		e.num(uint64(v.Len()) + 1)
		for i := range v.Len() {
			if err := e.value(v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("wire: a map keyed by %s", v.Type().Key())
		}
		if v.IsNil() {
			e.num(0)
			return nil
		}
		e.num(uint64(v.Len()) + 1)
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			e.bytes(k.String())
			if err := e.value(v.MapIndex(k)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		for _, i := range fieldsOf(v.Type()) {
			if err := e.value(v.Field(i)); err != nil {
				return fmt.Errorf("%s.%w", v.Type().Field(i).Name, err)
			}
		}
	default:
		return fmt.Errorf("wire: cannot encode a %s", v.Type())
	}
	return nil
}

type decoder struct {
	b []byte
}

// num reads a uvarint written with no byte more than it needs, so that
// every value has exactly one encoding.
func (d *decoder) num() (uint64, error) {
	x, n := binary.Uvarint(d.b)
	if n <= 0 || n > 1 && d.b[n-1] == 0 {
		return 0, ErrMalformed
	}
	d.b = d.b[n:]
	return x, nil
}

// length reads a slice's, array's or map's header: nil, or a length no
// greater than the bytes left (every item takes one byte at least, so no
// header makes a large allocation; a type whose items may take none is
// refused).
func (d *decoder) length(elem reflect.Type) (n int, isNil bool, err error) {
	x, err := d.num()
	if err != nil {
		return 0, false, err
	}
	if x == 0 {
		return 0, true, nil
	}
	if x-1 > uint64(len(d.b)) || elem != nil && elem.Size() == 0 {
		return 0, false, ErrMalformed
	}
	return int(x - 1), false, nil
}

func (d *decoder) str() (string, error) {
	x, err := d.num()
	if err != nil || x > uint64(len(d.b)) {
		return "", ErrMalformed
	}
	s := string(d.b[:x])
	d.b = d.b[x:]
	return s, nil
}

func (d *decoder) value(v reflect.Value) error {
	switch v.Kind() {
	case reflect.Bool:
		x, err := d.num()
		if err != nil || x > 1 {
			return ErrMalformed
		}
		v.SetBool(x == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x, n := binary.Varint(d.b)
		if n <= 0 || n > 1 && d.b[n-1] == 0 || v.OverflowInt(x) {
			return ErrMalformed
		}
		d.b = d.b[n:]
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		x, err := d.num()
		if err != nil || v.OverflowUint(x) {
			return ErrMalformed
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		x, err := d.num()
		f := math.Float64frombits(x)
		if err != nil || v.OverflowFloat(f) {
			return ErrMalformed
		}
		v.SetFloat(f)
	case reflect.String:
		s, err := d.str()
		if err != nil {
			return err
		}
		v.SetString(s)
	case reflect.Pointer:
		x, err := d.num()
		if err != nil || x > 1 {
			return ErrMalformed
		}
		if x == 0 {
			v.SetZero()
			return nil
		}
		p := reflect.New(v.Type().Elem())
		if err := d.value(p.Elem()); err != nil {
			return err
		}
		v.Set(p)
	case reflect.Slice:
		n, isNil, err := d.length(v.Type().Elem())
		if err != nil {
			return err
		}
		if isNil {
			v.SetZero()
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			s := reflect.MakeSlice(v.Type(), n, n)
			reflect.Copy(s, reflect.ValueOf(d.b[:n]))
			d.b = d.b[n:]
			v.Set(s)
			return nil
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			if err := d.value(s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
	case reflect.Array:
		n, isNil, err := d.length(nil)
		if err != nil || isNil || n != v.Len() {
			return ErrMalformed
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			for i := range n {
				v.Index(i).SetUint(uint64(d.b[i]))
			}
			d.b = d.b[n:]
			return nil
		}
		for i := range n {
			if err := d.value(v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("wire: a map keyed by %s", v.Type().Key())
		}
		n, isNil, err := d.length(nil)
		if err != nil {
			return err
		}
		if isNil {
			v.SetZero()
			return nil
		}
		m := reflect.MakeMapWithSize(v.Type(), n)
		last := ""
		for i := range n {
			k, err := d.str()
			if err != nil || i > 0 && k <= last {
				return ErrMalformed
			}
			last = k
			e := reflect.New(v.Type().Elem()).Elem()
			if err := d.value(e); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.Struct:
		for _, i := range fieldsOf(v.Type()) {
			if err := d.value(v.Field(i)); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("wire: cannot decode a %s", v.Type())
	}
	return nil
}
