package sshserve

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	gossh "golang.org/x/crypto/ssh"

	"github.com/taskd/taskd/pkg/task"
)

// loadHostKey reads the host key at file, generating an Ed25519 one (mode
// 0600, its directory 0700 if missing) on first start. Like sshd, it
// refuses a key that others may read.
func loadHostKey(file string) (signer gossh.Signer, generated bool, err error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		if data, err = generateHostKey(file); err != nil {
			return nil, false, err
		}
		generated = true
	} else if err != nil {
		return nil, false, fmt.Errorf("host key: %w", err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, false, fmt.Errorf("host key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, false, task.Invalidf("host key %s may be read by others (mode %04o): chmod 600 %s", file, perm, file)
	}
	signer, err = gossh.ParsePrivateKey(data)
	if err != nil {
		return nil, false, task.Invalidf("host key %s: %v", file, err)
	}
	return signer, generated, nil
}

func generateHostKey(file string) ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate host key: %w", err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "tasktop serve host key")
	if err != nil {
		return nil, fmt.Errorf("generate host key: %w", err)
	}
	data := pem.EncodeToMemory(block)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, fmt.Errorf("generate host key: %w", err)
	}
	// O_EXCL: two servers starting at once keep one key.
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("generate host key: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(file)
		return nil, fmt.Errorf("generate host key: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(file)
		return nil, fmt.Errorf("generate host key: %w", err)
	}
	return data, nil
}
