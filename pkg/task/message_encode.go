package task

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// appendPlain writes m as json.Marshal writes it, byte for byte, without
// reflection: the keys in field order, omitempty as the tags say, the type
// by name, payload and then as they are. It returns false when a value
// would need work from encoding/json (a string with a character it escapes,
// a raw value that is not compact JSON free of characters it escapes), and
// Encode falls back to json.Marshal (FuzzEncodeMessage).
func appendPlain(b []byte, m *Message) ([]byte, bool) {
	if !plainString(m.Code) || !plainString(m.Queue) || !plainString(m.UniqueKey) ||
		!plainString(m.CronExpr) || !plainString(m.Timezone) || !plainString(m.TraceParent) ||
		!plainString(m.Group) || !plainRaw(m.Payload, false) || !plainRaw(m.Then, true) {
		return nil, false
	}
	typ := m.Type.String()
	if !plainString(typ) {
		return nil, false
	}
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, m.ID, 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(m.Attempt), 10)
	b = appendStr(b, `,"code":"`, m.Code)
	b = appendStr(b, `,"queue":"`, m.Queue)
	b = appendStr(b, `,"type":"`, typ)
	b = append(b, `,"payload":`...)
	if m.Payload == nil {
		b = append(b, "null"...) // json.RawMessage's MarshalJSON of nil
	} else {
		b = append(b, m.Payload...)
	}
	if m.UniqueKey != "" {
		b = appendStr(b, `,"unique_key":"`, m.UniqueKey)
	}
	if m.CronExpr != "" {
		b = appendStr(b, `,"cron":"`, m.CronExpr)
	}
	if m.Timezone != "" {
		b = appendStr(b, `,"tz":"`, m.Timezone)
	}
	b = append(b, `,"timeout":`...)
	b = strconv.AppendInt(b, int64(m.Timeout), 10)
	b = append(b, `,"max_retry":`...)
	b = strconv.AppendInt(b, int64(m.MaxRetry), 10)
	b = append(b, `,"retry_count":`...)
	b = strconv.AppendInt(b, int64(m.RetryCount), 10)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(m.Priority), 10)
	b = append(b, `,"due_ms":`...)
	b = strconv.AppendInt(b, m.DueUnixMS, 10)
	if m.ScheduledUnixMS != 0 {
		b = append(b, `,"sched_ms":`...)
		b = strconv.AppendInt(b, m.ScheduledUnixMS, 10)
	}
	b = append(b, `,"dispatched_ms":`...)
	b = strconv.AppendInt(b, m.DispatchedUnixMS, 10)
	if len(m.Then) > 0 {
		b = append(b, `,"then":`...)
		b = append(b, m.Then...)
	}
	if m.Batch != 0 {
		b = append(b, `,"batch":`...)
		b = strconv.AppendInt(b, m.Batch, 10)
	}
	if m.TraceParent != "" {
		b = appendStr(b, `,"tp":"`, m.TraceParent)
	}
	if m.Group != "" {
		b = appendStr(b, `,"group":"`, m.Group)
	}
	if m.Grouped {
		b = append(b, `,"grouped":true`...)
	}
	return append(b, '}'), true
}

// appendStr writes a key (with its opening quote) and a plain string.
func appendStr(b []byte, key, s string) []byte {
	b = append(b, key...)
	b = append(b, s...)
	return append(b, '"')
}

// plainString: json.Marshal writes s as it is between quotes. It escapes
// '"', '\\', control characters and, as HTML, '<', '>', '&', U+2028 and
// U+2029, and replaces invalid UTF-8.
func plainString(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || r == '\u2028' || r == '\u2029' {
			return false
		}
		i += n
	}
	return true
}

// plainRaw: json.Marshal writes the raw value as it is. It compacts a
// RawMessage (whitespace outside strings goes), escapes '<', '>', '&' and
// U+2028/U+2029 (lead byte 0xE2, refused here whatever follows) anywhere in
// it, and fails on invalid JSON. An empty value is omitted with omitEmpty;
// without it nil is "null" and an empty non-nil value an error.
func plainRaw(v json.RawMessage, omitEmpty bool) bool {
	if len(v) == 0 {
		return omitEmpty || v == nil
	}
	in, esc := false, false
	for _, c := range v {
		switch {
		case c == '<' || c == '>' || c == '&' || c == 0xE2:
			return false
		case in && esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return json.Valid(v)
}
