package task

import (
	"errors"
	"fmt"
)

// Code classifies an error for the front ends: the CLI maps it to an exit
// code, the TUI to the colour of its error bar.
type Code string

const (
	CodeInvalid  Code = "invalid"   // bad input: nothing was written
	CodeNotFound Code = "not_found" // the task, queue or lock does not exist
	// CodeConfig: the deployment is wrong (credentials, database name,
	// schema version, Redis policy); retrying cannot help, a person must
	// fix it. `taskd run` exits with EX_CONFIG on it.
	CodeConfig   Code = "config"
	CodeInternal Code = "internal" // anything else: a dependency failed
)

// Error is an error with a Code and a one-line message for humans.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// Invalidf reports bad input.
func Invalidf(format string, args ...any) error {
	return &Error{Code: CodeInvalid, Message: fmt.Sprintf(format, args...)}
}

// NotFoundf reports a missing object.
func NotFoundf(format string, args ...any) error {
	return &Error{Code: CodeNotFound, Message: fmt.Sprintf(format, args...)}
}

// Configf reports a deployment error that retrying cannot heal.
func Configf(format string, args ...any) error {
	return &Error{Code: CodeConfig, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the Code of the first *Error in err's chain, or
// CodeInternal.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
