package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/umbravec/umbra/internal/keyrule"
)

// This file holds how the commands read keys: key files (build and add
// --keys, delete --keys-file, search --allow-keys, written by export
// --keys-out) and key lists (delete and get --keys a,b). Every key is held
// to the engine's own rule (internal/keyrule: non-empty UTF-8 without line
// breaks, at most 4096 bytes), checked here so that a bad key is named by
// its file and line before the store is opened.

// keyLines says what the lines of a key file are, and so what an empty
// line means.
type keyLines int

const (
	// rowKeys: line i is the key of row i, an empty line a row without a
	// key (what export --keys-out writes for one): build --keys.
	rowKeys keyLines = iota
	// everyRowKeyed: line i is the key of row i and every row has one:
	// add --keys, whose rows get their IDs from their keys.
	everyRowKeyed
	// keySet: keys, in any order; empty lines name nothing and are
	// skipped, as in an ID file: delete --keys-file, search --allow-keys.
	keySet
)

// readKeys reads the key file given to flag: text, one key per line, taken
// as written (only the line end, \n or \r\n, is dropped). It returns the
// keys ("" for an empty line under rowKeys) and the line of each.
func readKeys(ctx context.Context, flag, path string, lines keyLines) (keys []string, at []int, err error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, nil, fmt.Errorf("%s %s is a directory: want a text file with one key per line", flag, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %s", flag, cause(err))
	}
	defer f.Close()
	keys = []string{}
	err = eachLine(ctx, f, func(n int, line string) error {
		if line == "" {
			switch lines {
			case keySet:
				return nil
			case everyRowKeyed:
				return fmt.Errorf("%s %s, line %d is empty: add --keys names every vector by a key (add vectors without keys without --keys)", flag, path, n)
			}
		} else if err := keyrule.Check(line); err != nil {
			return fmt.Errorf("%s %s, line %d: %s", flag, path, n, err)
		}
		keys, at = append(keys, line), append(at, n)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return keys, at, nil
}

// parseKeyList reads a --keys list: keys separated by commas, each taken as
// written (spaces are part of a key) and held to the key rule.
func parseKeyList(flag, s string) ([]string, error) {
	keys := strings.Split(s, ",")
	for i, k := range keys {
		if k == "" {
			return nil, fmt.Errorf("%s: entry %d is empty: want keys separated by commas, like %s alice/m1,alice/m2 (a key holding a comma: give a key file)", flag, i+1, flag)
		}
		if err := keyrule.Check(k); err != nil {
			return nil, fmt.Errorf("%s: entry %d: %s", flag, i+1, err)
		}
	}
	return keys, nil
}

// repeatedKey refuses a key that a list names twice, saying where: at[i]
// is key i's line or entry (unit: "lines", "entries"). Empty keys (rows
// without one) are not compared.
func repeatedKey(keys []string, at []int, unit string) error {
	seen := make(map[string]int, len(keys))
	for i, k := range keys {
		if k == "" {
			continue
		}
		if j, ok := seen[k]; ok {
			return fmt.Errorf("key %s is given twice (%s %d and %d)", keyrule.Quote(k), unit, at[j], at[i])
		}
		seen[k] = i
	}
	return nil
}

// countEmpty counts the rows without a key.
func countEmpty(keys []string) int {
	n := 0
	for _, k := range keys {
		if k == "" {
			n++
		}
	}
	return n
}

// positions returns 1, 2, …, n: the entries of a list.
func positions(n int) []int {
	at := make([]int, n)
	for i := range at {
		at[i] = i + 1
	}
	return at
}

// someKeys names a few keys: `key "a" is`, `3 keys ("a", "b", "c") are`,
// `40 keys ("a", "b", "c", "d", "e", …) are`.
func someKeys(keys []string) string {
	if len(keys) == 1 {
		return "key " + keyrule.Quote(keys[0]) + " is"
	}
	const show = 5
	parts := make([]string, 0, show+1)
	for i, k := range keys {
		if i == show {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, keyrule.Quote(k))
	}
	return fmt.Sprintf("%d keys (%s) are", len(keys), strings.Join(parts, ", "))
}

// textKey is a key as a text table shows it: as it is, or quoted (Go
// syntax) when it breaks the key rule, which only a store written before
// the rule holds, so that a line break in it cannot break the table.
func textKey(key string) string {
	if key == "" || keyrule.Check(key) == nil {
		return key
	}
	return strconv.Quote(key)
}
