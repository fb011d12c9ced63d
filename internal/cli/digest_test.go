package cli

import (
	"crypto/sha256"
	"reflect"
	"testing"

	"github.com/agent-launcher/agent-launcher/landlock"
	"github.com/agent-launcher/agent-launcher/rules"
)

func digestOf(t *testing.T, v any) [32]byte {
	t.Helper()
	h := sha256.New()
	if err := digestValue(h, reflect.ValueOf(v)); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// fill sets every exported field reachable from v: strings, numbers and
// bools to non-zero values, one element in every slice and map, every
// pointer to a new value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.String:
		v.SetString("s")
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	}
}

// leaves calls f for every settable leaf reachable from v (map values
// aside), with its path.
func leaves(v reflect.Value, path string, f func(string, reflect.Value)) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			leaves(v.Elem(), path, f)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			leaves(v.Index(i), path+"[]", f)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				leaves(v.Field(i), path+"."+v.Type().Field(i).Name, f)
			}
		}
	case reflect.Map:
	default:
		f(path, v)
	}
}

// TestDigestValueCoversEveryField: the plan key changes when any field of
// the policy or the view changes, in a policy and a view with every field
// set (a field added later is covered or fails here), and whether a
// pointer or a slice is nil or holds a zero value is told apart.
func TestDigestValueCoversEveryField(t *testing.T) {
	for _, v := range []any{&rules.Policy{}, &landlock.View{}} {
		val := reflect.ValueOf(v).Elem()
		fill(val)
		base := digestOf(t, v)
		if again := digestOf(t, v); again != base {
			t.Fatal("two digests of one value differ")
		}
		n := 0
		leaves(val, val.Type().Name(), func(path string, leaf reflect.Value) {
			n++
			old := reflect.New(leaf.Type()).Elem()
			old.Set(leaf)
			switch leaf.Kind() {
			case reflect.Bool:
				leaf.SetBool(!leaf.Bool())
			case reflect.String:
				leaf.SetString(leaf.String() + "x")
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				leaf.SetInt(leaf.Int() + 1)
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				leaf.SetUint(leaf.Uint() + 1)
			case reflect.Float32, reflect.Float64:
				leaf.SetFloat(leaf.Float() + 1)
			default:
				t.Errorf("%s: a leaf of kind %s", path, leaf.Kind())
				return
			}
			if digestOf(t, v) == base {
				t.Errorf("%s changed, the digest did not", path)
			}
			leaf.Set(old)
		})
		if digestOf(t, v) != base {
			t.Fatal("the value was not restored")
		}
		t.Logf("%T: %d fields", v, n)
		if n < 8 {
			t.Errorf("%T: only %d fields reached", v, n)
		}
	}
	if digestOf(t, []string(nil)) == digestOf(t, []string{}) || digestOf(t, (*landlock.View)(nil)) == digestOf(t, &landlock.View{}) ||
		digestOf(t, []string{"ab"}) == digestOf(t, []string{"a", "b"}) {
		t.Error("a nil slice or pointer and an empty one, or two splits of one string, digest alike")
	}
}
