package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Manager runs a set of services: it starts them in the given order (each
// one Running before the next starts), stops them in reverse order, and stops
// all of them as soon as one fails.
type Manager struct {
	services    []*Service
	logger      *slog.Logger
	stopTimeout time.Duration
}

// ErrStopDeadline is returned by Run when services were still stopping
// when the stop deadline passed.
var ErrStopDeadline = errors.New("stop deadline passed")

// WithStopTimeout bounds the stop: once the services were asked to stop,
// Run waits at most d for them (in reverse order, as ever) and then
// returns ErrStopDeadline naming those still stopping, so that the process
// can exit within its supervisor's grace period whatever a dependency
// does (a broker or a database that does not answer). Work still running
// is abandoned as in a crash, which the services recover from; nothing
// they committed is lost. 0 (the default) waits without bound.
func (m *Manager) WithStopTimeout(d time.Duration) *Manager {
	m.stopTimeout = d
	return m
}

// NewManager returns a Manager for services, started in slice order.
func NewManager(logger *slog.Logger, services ...*Service) *Manager {
	return &Manager{services: services, logger: logger}
}

// Ready reports nil when every service is Running, else which ones are not.
func (m *Manager) Ready() error {
	var notReady []string
	for _, s := range m.services {
		if st := s.State(); st != Running {
			notReady = append(notReady, s.Name()+"="+st.String())
		}
	}
	if len(notReady) > 0 {
		return fmt.Errorf("not ready: %s", strings.Join(notReady, ", "))
	}
	return nil
}

// Run starts every service and blocks until ctx is cancelled or any service
// ends; then it stops the others in reverse order and returns the joined
// failures (nil for a clean shutdown).
func (m *Manager) Run(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	started := 0
	var startErr error
	for _, s := range m.services {
		if err := s.Start(runCtx); err != nil {
			startErr = err
			break
		}
		started++
		if err := s.AwaitRunning(ctx); err != nil {
			startErr = fmt.Errorf("awaiting %s: %w", s.Name(), err)
			break
		}
		m.logger.Debug("service running", "service", s.Name())
	}
	if startErr == nil {
		cases := make(chan *Service, len(m.services))
		for _, s := range m.services {
			go func(s *Service) {
				<-s.Done()
				cases <- s
			}(s)
		}
		select {
		case <-ctx.Done():
			m.logger.Info("shutting down", "cause", context.Cause(ctx))
		case s := <-cases:
			if f := s.FailureCase(); f != nil {
				m.logger.Error("service failed; stopping all", "service", s.Name(), "err", f)
			} else {
				m.logger.Info("service finished; stopping all", "service", s.Name())
			}
		}
	}
	var errs []error
	if startErr != nil {
		errs = append(errs, startErr)
	}
	stopCtx := context.Background()
	if m.stopTimeout > 0 {
		var stopCancel context.CancelFunc
		stopCtx, stopCancel = context.WithTimeout(stopCtx, m.stopTimeout)
		defer stopCancel()
	}
	var stuck []string
	for i := len(m.services) - 1; i >= 0; i-- {
		s := m.services[i]
		s.StopAsync()
		if i < started || s.State() != Terminated {
			if stopCtx.Err() != nil {
				stuck = append(stuck, s.Name())
				continue
			}
			err := s.AwaitTerminated(stopCtx)
			if err != nil && stopCtx.Err() != nil && errors.Is(err, stopCtx.Err()) {
				stuck = append(stuck, s.Name())
				continue
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(stuck) > 0 {
		m.logger.Error("stop deadline passed; services still stopping are abandoned", "deadline", m.stopTimeout, "services", stuck)
		errs = append(errs, fmt.Errorf("%w (%v): still stopping: %s", ErrStopDeadline, m.stopTimeout, strings.Join(stuck, ", ")))
	}
	return errors.Join(errs...)
}
