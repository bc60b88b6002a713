package core

import (
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestStagesAddEveryField: Add reaches every field of Stages, so a field
// added to Stages but not to Totals fails here rather than being dropped.
func TestStagesAddEveryField(t *testing.T) {
	var o Stages
	v := reflect.ValueOf(&o).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.String:
			f.SetString("x")
		default:
			t.Fatalf("field %s of kind %v: teach AddTo and this test about it", v.Type().Field(i).Name, f.Kind())
		}
	}
	var s Stages
	s.Add(&o)
	s.Add(&o)
	sv := reflect.ValueOf(s)
	for i := range sv.NumField() {
		name := v.Type().Field(i).Name
		switch f := sv.Field(i); f.Kind() {
		case reflect.Int64:
			assert.Equal(t, 2*int64(i+1), f.Int(), name)
		case reflect.String:
			assert.Equal(t, "x", f.String(), name)
		}
	}
	// An empty clock or path leaves the last one; nil adds nothing.
	s.Add(&Stages{Upload: time.Second})
	assert.Equal(t, "x", s.Path)
	assert.Equal(t, "x", s.KernelClock)
	s.Add(nil)
	(*Stages)(nil).Add(&o)
}
