package nullable

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Timestamp converts a nullable timestamp; NULL stays absent (nil).
func Timestamp(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

// String returns the string or "" for NULL.
func String(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
