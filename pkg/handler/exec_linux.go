package handler

import "syscall"

// cloexecPipe is a pipe whose ends are closed on exec.
func cloexecPipe() ([2]int, error) {
	var fds [2]int
	err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC)
	return fds, err
}
