package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"msgexchange/services/internal/sis"
)

// errDecodeFailed makes "decode" exit non-zero when any file failed.
var errDecodeFailed = errors.New("one or more files failed to decode")

// decodeCommand is "decode FILE...": the offline decoder for operators. It
// needs no services and uses exactly the decoder the processor uses.
//
// By default a file is bytes, as the compat entry receives a message: the
// XML declaration's encoding says how to read them. With --text it is
// decoded the way the processor decodes a stored mailbox text
// (sis.DecodeText): the file must be UTF-8 and the declared encoding is
// ignored, since the mailbox's text column was already converted from it.
// That is what a message exported from the mailbox needs, whose
// declaration still names the charset it arrived in (GB2312, say).
func decodeCommand() *command {
	return &command{
		name:     "decode",
		synopsis: "FILE... [--day-boundary] [--text]",
		summary:  "decode SIS files offline: one JSON object per file (META, classification, lossless document or error)",
		setup: func(fs *pflag.FlagSet) runFunc {
			day := fs.Bool("day-boundary", false, "include the DTTM day in the identity key (identity.include-day-boundary)")
			text := fs.Bool("text", false, "decode each file as the processor decodes a stored mailbox text: UTF-8, the XML declaration's encoding ignored (for a message exported from the mailbox); default: bytes, read as the declaration says")
			return func(_ context.Context, a *app, args []string) error {
				if len(args) == 0 {
					return usagef("decode: at least one FILE is required")
				}
				failed := false
				enc := json.NewEncoder(a.stdout)
				enc.SetEscapeHTML(false)
				for _, f := range args {
					res := decodeFile(f, *text, sis.IdentityOptions{IncludeDayBoundary: *day})
					if res.Error != nil {
						failed = true
					}
					if err := enc.Encode(res); err != nil {
						return fmt.Errorf("writing result: %w", err)
					}
				}
				if failed {
					return errDecodeFailed
				}
				return nil
			}
		},
	}
}

// decodeResult is the JSON object printed for one file.
type decodeResult struct {
	File           string              `json:"file"`
	Meta           *sis.Meta           `json:"meta,omitempty"`
	Classification *sis.Classification `json:"classification,omitempty"`
	Document       *sis.Node           `json:"document,omitempty"`
	Error          *decodeError        `json:"error,omitempty"`
}

type decodeError struct {
	Class  string `json:"class"`
	Reason string `json:"reason"`
}

// decodeFile decodes the file at path: as bytes (sis.Decode), or with
// asText as a stored mailbox text (sis.DecodeText).
func decodeFile(path string, asText bool, opts sis.IdentityOptions) decodeResult {
	res := decodeResult{File: path}
	raw, err := os.ReadFile(path)
	if err != nil {
		res.Error = &decodeError{Class: "IO", Reason: err.Error()}
		return res
	}
	var msg *sis.Message
	if asText {
		msg, err = sis.DecodeText(string(raw))
	} else {
		msg, err = sis.Decode(raw)
	}
	if err != nil {
		res.Error = classErr(err)
		return res
	}
	res.Meta, res.Document = &msg.Meta, msg.Root
	cls, err := sis.Classify(msg, opts)
	if err != nil {
		res.Error = classErr(err)
		return res
	}
	res.Classification = &cls
	return res
}

func classErr(err error) *decodeError {
	var e *sis.Error
	if errors.As(err, &e) {
		return &decodeError{Class: string(e.Class), Reason: e.Reason}
	}
	return &decodeError{Class: "UNKNOWN", Reason: err.Error()}
}
