package task

import "fmt"

// ByteSize writes a size short, for people: 900 bytes, 64.0 KiB, 7.9 MiB,
// 1.5 GiB. Every size taskd prints (payloads, results, Redis's memory,
// MySQL's packet) goes through it.
func ByteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
