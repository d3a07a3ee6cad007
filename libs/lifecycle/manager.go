package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// Manager runs a set of services: it starts them in the given order (each
// one Running before the next starts), stops them in reverse order, and stops
// all of them as soon as one fails.
type Manager struct {
	services []*Service
	logger   *slog.Logger
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
	for i := len(m.services) - 1; i >= 0; i-- {
		s := m.services[i]
		s.StopAsync()
		if i < started || s.State() != Terminated {
			if err := s.AwaitTerminated(context.Background()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
