// Package meta is typed metadata per row and exact filters over it.
package meta
