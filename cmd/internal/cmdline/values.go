package cmdline

import (
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
)

// flagValue pops the value of the flag being decoded. kong's own message
// for a missing value names token types ("got "<EOL>" (EOL)"); this one
// says what is wrong. A token with a leading dash is a value when isValue
// takes it (a negative number: --k -2), else the next flag.
func flagValue(ctx *kong.DecodeContext, isValue func(string) bool) (string, error) {
	t := ctx.Scan.Peek()
	if t.IsEOL() {
		return "", errors.New("needs a value")
	}
	if !t.IsValue() && (isValue == nil || !isValue(t.String())) {
		return "", fmt.Errorf("needs a value, got the flag %s", t)
	}
	ctx.Scan.Pop()
	return t.String(), nil
}

// isNumber takes any token strconv reads as a number.
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// decodeString reads every string flag and argument.
func decodeString(ctx *kong.DecodeContext, target reflect.Value) error {
	s, err := flagValue(ctx, isNumber)
	if err != nil {
		return err
	}
	target.SetString(s)
	return nil
}

// numberMapper decodes a number with parse, whose error says what is
// wanted; a leading minus is part of the value, not a flag.
func numberMapper[T any](parse func(string) (T, error)) kong.Mapper {
	return kong.MapperFunc(func(ctx *kong.DecodeContext, target reflect.Value) error {
		s, err := flagValue(ctx, func(s string) bool { _, err := parse(s); return err == nil || isNumber(s) })
		if err != nil {
			return err
		}
		v, err := parse(s)
		if err != nil {
			return err
		}
		target.Set(reflect.ValueOf(v))
		return nil
	})
}

func parseInt[T int | int64](s string) (T, error) {
	size := 64
	if reflect.TypeFor[T]().Kind() == reflect.Int {
		size = bits.UintSize
	}
	v, err := strconv.ParseInt(s, 10, size)
	if err != nil {
		return 0, fmt.Errorf("invalid value %q: want a whole number", s)
	}
	return T(v), nil
}

func parseUint(s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid value %q: want a whole number from 0", s)
	}
	return v, nil
}

func parseFloat(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("invalid value %q: want a number", s)
	}
	return v, nil
}

func parseDuration(s string) (time.Duration, error) {
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid value %q: want a duration such as 500ms, 2s or 1m", s)
	}
	return v, nil
}

// Choice is a flag restricted to the values in its field's choices tag,
// case-insensitively, and stored in lower case. A choice without a
// default also takes "", for unset.
type Choice string

func (c *Choice) Decode(ctx *kong.DecodeContext) error {
	s, err := flagValue(ctx, nil)
	if err != nil {
		return err
	}
	allowed := strings.Split(ctx.Value.Tag.Get("choices"), ",")
	if v := strings.ToLower(s); slices.Contains(allowed, v) || (v == "" && !ctx.Value.HasDefault) {
		*c = Choice(v)
		return nil
	}
	return fmt.Errorf("unknown %s %q: want %s", ctx.Value.Name, s, OrList(allowed))
}

// Value pops the value of the flag a type of a command's own decodes: a
// token with a leading dash is a value only when it is a number.
func Value(ctx *kong.DecodeContext) (string, error) { return flagValue(ctx, isNumber) }
