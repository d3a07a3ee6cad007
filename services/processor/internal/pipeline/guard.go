package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"msgexchange/libs/clip"
)

// guard runs one stage of handling message msgID (decoding, classifying,
// handling) and turns a panic inside it into that message's failure: an
// INFRA *failure whose reason holds the panic value and a short stack, so
// the message is retried with backoff and ends DEAD(EXHAUSTED) if it keeps
// panicking, while the pipeline goes on (R-H1). Only these stages are
// guarded: a panic in the executor's own loop or database code still
// crashes the process, loudly, and the crash is then counted by the next
// start through the execution marker.
func (e *Engine) guard(ctx context.Context, msgID int64, stage string, fn func() error) (err error) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		value := clip.N(fmt.Sprint(v), 512)
		stack := panicStack()
		e.metrics.panics.Add(ctx, 1)
		e.log.Error("panic while handling a message; recorded as its failure", "msg_id", msgID, "stage", stage,
			"panic", value, "stack", stack, "alert", "processor-handler-panic")
		err = &failure{class: ClassInfra, reason: clip.Text(fmt.Sprintf("panic while %s: %s (at %s)", stage, value, stack))}
	}()
	runStageHook(ctx, stage, msgID)
	return fn()
}

// runStageHook runs the context's stageHook, if any, for stage: at the
// start of each guarded stage, and at points inside one that a test must
// be able to fail at ("snapshot planned").
func runStageHook(ctx context.Context, stage string, msgID int64) {
	if hook, ok := ctx.Value(stageHookKey{}).(stageHook); ok {
		hook(stage, msgID)
	}
}

// stageHook runs at the start of each guarded stage, inside the guard, when
// the context carries one: tests use it to make a stage panic. Production
// contexts carry none; the cost is one context lookup per stage.
type stageHook func(stage string, msgID int64)

// stageHookKey is the context key of a stageHook.
type stageHookKey struct{}

// panicStackFrames is how many frames of a panicking stack a reason keeps.
const panicStackFrames = 8

// panicStack summarises the stack of a panic being recovered — called from
// the deferred function — as "function (file:line)" frames, innermost
// first, without the runtime's own frames.
func panicStack() string {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs) // skip Callers, panicStack and the deferred function
	frames := runtime.CallersFrames(pcs[:n])
	var parts []string
	for len(parts) < panicStackFrames {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") && f.Function != "" {
			fn := f.Function
			if i := strings.LastIndex(fn, "/"); i >= 0 {
				fn = fn[i+1:]
			}
			parts = append(parts, fmt.Sprintf("%s (%s:%d)", fn, filepath.Base(f.File), f.Line))
		}
		if !more {
			break
		}
	}
	return strings.Join(parts, " < ")
}
