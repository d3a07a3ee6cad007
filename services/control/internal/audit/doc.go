// Package audit checks the operator and reason that every audited
// control-plane operation (a replay, an outbound request, a forced lease
// release) records. It exists so that the rules — both required, UTF-8 text
// without NUL, at most MaxLen characters — and their messages are the same
// wherever an operator's action is written to an audit table.
package audit
