package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// State is the phase a Service is in.
type State int

// The phases of a Service, in the only order they can occur.
const (
	New State = iota
	Starting
	Running
	Stopping
	Terminated
	Failed
)

func (s State) String() string {
	switch s {
	case New:
		return "New"
	case Starting:
		return "Starting"
	case Running:
		return "Running"
	case Stopping:
		return "Stopping"
	case Terminated:
		return "Terminated"
	case Failed:
		return "Failed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// StartingFn prepares a service; an error fails the service before it runs.
type StartingFn func(ctx context.Context) error

// RunningFn is the service's main loop. It must return when ctx is
// cancelled; returning nil before that means the service finished its work.
type RunningFn func(ctx context.Context) error

// StoppingFn releases resources after RunningFn returned. failure is the
// error that ended the service, if any.
type StoppingFn func(failure error) error

// Service is a named component with a managed lifecycle. Create it with
// NewService; it is started by a Manager or by StartAndAwaitRunning.
type Service struct {
	name     string
	starting StartingFn
	running  RunningFn
	stopping StoppingFn

	mu       sync.Mutex
	state    State
	failure  error
	cancel   context.CancelCauseFunc
	running1 chan struct{} // closed when Running is reached or the service ends
	reached  bool          // Running was reached
	done     chan struct{} // closed on Terminated or Failed
}

// ErrStopped is the cancellation cause given to a service's context when it
// is asked to stop.
var ErrStopped = errors.New("service stopped")

// NewService builds a Service. Any function may be nil.
func NewService(name string, starting StartingFn, running RunningFn, stopping StoppingFn) *Service {
	return &Service{
		name:     name,
		starting: starting,
		running:  running,
		stopping: stopping,
		running1: make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// Name returns the service's name, used in logs and readiness reports.
func (s *Service) Name() string { return s.name }

// State returns the current phase.
func (s *Service) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// FailureCase returns the error that failed the service, or nil.
func (s *Service) FailureCase() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// Start launches the service in the background. The context bounds the
// service's whole life; cancelling it is the same as StopAsync.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.state != New {
		s.mu.Unlock()
		return fmt.Errorf("starting service %s: already %s", s.name, s.state)
	}
	s.state = Starting
	sctx, cancel := context.WithCancelCause(ctx)
	s.cancel = cancel
	s.mu.Unlock()
	go s.run(sctx)
	return nil
}

func (s *Service) run(ctx context.Context) {
	var err error
	if s.starting != nil {
		err = s.starting(ctx)
	}
	if err == nil {
		s.mu.Lock()
		s.state, s.reached = Running, true
		s.mu.Unlock()
		close(s.running1)
		if s.running != nil {
			err = s.running(ctx)
		}
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			err = nil // a requested stop is not a failure
		}
	} else {
		err = fmt.Errorf("starting %s: %w", s.name, err)
	}
	s.setState(Stopping)
	if s.stopping != nil {
		if serr := s.stopping(err); serr != nil && err == nil {
			err = fmt.Errorf("stopping %s: %w", s.name, serr)
		}
	}
	s.cancel(ErrStopped)
	s.mu.Lock()
	if err != nil {
		s.state = Failed
		s.failure = err
	} else {
		s.state = Terminated
	}
	reachedRunning := s.reached
	s.mu.Unlock()
	if !reachedRunning {
		// A failed start: AwaitRunning wakes only now, when the failure is
		// recorded, so it can report it.
		close(s.running1)
	}
	close(s.done)
}

func (s *Service) setState(st State) {
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
}

// StopAsync asks the service to stop. It is idempotent and safe on a service
// that never started.
func (s *Service) StopAsync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == New {
		s.state = Terminated
		close(s.running1)
		close(s.done)
		return
	}
	if s.cancel != nil {
		s.cancel(ErrStopped)
	}
}

// AwaitRunning blocks until the service runs, or returns the reason it
// never will.
func (s *Service) AwaitRunning(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.running1:
	}
	if st := s.State(); st != Running {
		if f := s.FailureCase(); f != nil {
			return f
		}
		return fmt.Errorf("service %s is %s, not Running", s.name, st)
	}
	return nil
}

// AwaitTerminated blocks until the service ended and returns its failure.
func (s *Service) AwaitTerminated(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return s.FailureCase()
	}
}

// Done is closed when the service has terminated or failed.
func (s *Service) Done() <-chan struct{} { return s.done }
