package benchmark

import "context"

// Latencies exposes latencies to the tests of the package's API.
func Latencies(ctx context.Context, e *Env, from, to string) ([]float64, error) {
	return e.latencies(ctx, from, to)
}
