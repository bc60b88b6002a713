package testkit

// ErrOf returns the error of a call that also returns a value the caller
// does not need: require.NoError(t, testkit.ErrOf(ix.Add(ctx, rows))).
func ErrOf[T any](_ T, err error) error { return err }
