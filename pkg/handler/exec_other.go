//go:build !linux

package handler

import "syscall"

// cloexecPipe is a pipe whose ends are closed on exec; ForkLock keeps a
// concurrent fork from inheriting them before they are marked.
func cloexecPipe() ([2]int, error) {
	var fds [2]int
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	if err := syscall.Pipe(fds[:]); err != nil {
		return fds, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return fds, nil
}
