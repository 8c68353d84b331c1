//go:build !linux

package handler

import "context"

// StartReaper does nothing off Linux: there is no child subreaper.
func StartReaper(context.Context) error { return nil }
