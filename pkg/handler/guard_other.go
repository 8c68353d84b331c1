//go:build !linux

package handler

import (
	"log/slog"
	"os"
)

// Guard does nothing off Linux.
type Guard struct{}

// StartGuard starts nothing off Linux: nil, no error.
func StartGuard(string, *os.File, *slog.Logger) (*Guard, error) { return nil, nil }

// StartCommandGuard starts nothing off Linux: nil, no error.
func StartCommandGuard(string, *os.File, *slog.Logger) (*Guard, error) { return nil, nil }

// Pid is 0: no guard process.
func (g *Guard) Pid() int { return 0 }

// Stop does nothing.
func (g *Guard) Stop() {}

// Group does nothing.
func (g *Guard) Group(int) func() { return func() {} }

func groupStarted(int) {}

func groupEnded(int) {}
