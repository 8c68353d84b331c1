package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Child is a task that its parent submits when it succeeds: one step of a
// chain. Its payload is the parent's result (see ChildPayload). Then are
// its own children, submitted when it succeeds in turn.
type Child struct {
	Code     string  `json:"code"`
	Queue    string  `json:"queue,omitempty"` // resolved at submission: "" is the code
	Priority int     `json:"priority"`
	Timeout  int     `json:"timeout"` // seconds
	MaxRetry int     `json:"max_retry"`
	DelayMS  int64   `json:"delay_ms,omitempty"`
	Then     []Child `json:"then,omitempty"`
}

// MaxChildren bounds the steps one submission may name, counted over the
// whole tree: a chain is a few steps, not a workload.
const MaxChildren = 100

// ValidateChildren checks a tree of children, each field as a submission's
// (codes, queues, priority, timeout, retries), and its size.
func ValidateChildren(cs []Child) error {
	n := 0
	var walk func(cs []Child) error
	walk = func(cs []Child) error {
		for i := range cs {
			c := &cs[i]
			if n++; n > MaxChildren {
				return Invalidf("a task may name at most %d tasks to run after it", MaxChildren)
			}
			if err := ValidateName("task code", c.Code); err != nil {
				return err
			}
			if c.Queue != "" {
				if err := ValidateName("queue", c.Queue); err != nil {
					return err
				}
			}
			if err := ValidatePriority(c.Priority); err != nil {
				return err
			}
			if err := ValidateTimeout(time.Duration(c.Timeout) * time.Second); err != nil {
				return err
			}
			if err := ValidateMaxRetry(c.MaxRetry); err != nil {
				return err
			}
			if c.DelayMS < 0 {
				return Invalidf("delay of %s is negative", c.Code)
			}
			if err := walk(c.Then); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(cs)
}

// EncodeChildren is the then_spec column of a task with children cs, or
// nil when there are none.
func EncodeChildren(cs []Child) (json.RawMessage, error) {
	if len(cs) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(cs)
	if err != nil {
		return nil, fmt.Errorf("encode children: %w", err)
	}
	return b, nil
}

// DecodeChildren parses a then_spec column.
func DecodeChildren(b []byte) ([]Child, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var cs []Child
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("decode children: %w", err)
	}
	return cs, nil
}

// TruncatedBytes is how many bytes of an output were dropped to keep it
// within the output limit: what its "…(truncated N bytes)" first line
// says, 0 for an output kept whole.
func TruncatedBytes(output string) int {
	head, _, ok := strings.Cut(output, "\n")
	if !ok || !strings.HasPrefix(head, "…(truncated ") {
		return 0
	}
	var dropped int
	if _, err := fmt.Sscanf(head, "…(truncated %d bytes)", &dropped); err != nil || dropped < 0 {
		return 0
	}
	return dropped
}

// ChildPayload is the payload a child gets from its parent's result: the
// result itself when it is one JSON value (a handler that prints
// {"report": 7}), {} when it is empty, else the result as a JSON string.
func ChildPayload(result string) json.RawMessage {
	r := bytes.TrimSpace([]byte(result))
	switch {
	case len(r) == 0:
		return json.RawMessage("{}")
	case json.Valid(r):
		return r
	}
	b, _ := json.Marshal(result) // a string always marshals
	return b
}

// ChainText shows children as "b → c, d": a sequence with arrows,
// siblings with commas, a group of siblings in parentheses when it follows
// an arrow.
func ChainText(cs []Child) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.Code
		if len(c.Then) > 0 {
			next := ChainText(c.Then)
			if len(c.Then) > 1 {
				next = "(" + next + ")"
			}
			parts[i] += " → " + next
		}
	}
	return strings.Join(parts, ", ")
}
