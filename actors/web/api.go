package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/coordinator"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/snapshots"
)

// maxBody bounds a request body; larger ones get 413.
const maxBody = 64 << 10

// CheckpointsResponse is the body of GET /api/v1/checkpoints.
type CheckpointsResponse struct {
	Checkpoints []monitor.Checkpoint `json:"checkpoints"`
}

// TimelineResponse is the body of GET /api/v1/timeline.
type TimelineResponse struct {
	Timeline []monitor.TimelineEntry `json:"timeline"`
}

// TriggerResponse is the body of a successful POST /api/v1/checkpoints.
type TriggerResponse struct {
	ID uint64 `json:"id"`
}

// SavepointRequest is the body of POST /api/v1/savepoints.
type SavepointRequest struct {
	// Name is the savepoint's name (see snapshots.ValidateSavepointName).
	Name string `json:"name"`
	// Stop stops the job once the savepoint is complete.
	Stop bool `json:"stop"`
}

// SavepointResponse is the body of a successful POST /api/v1/savepoints.
type SavepointResponse struct {
	ID      uint64 `json:"id"`
	Name    string `json:"name"`
	Stopped bool   `json:"stopped"`
}

// ErrorResponse is the body of every error.
type ErrorResponse struct {
	Error string `json:"error"`
}

func (s *Server) job(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.mon.Job())
}

func (s *Server) checkpoints(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryLimit(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, CheckpointsResponse{Checkpoints: s.mon.Checkpoints(limit)}) // never nil: [] when empty
}

func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	raw := r.PathValue("id")
	id, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "web: checkpoint id %q is not a non-negative integer", raw)
		return
	}
	cp, ok := s.mon.Checkpoint(id)
	if !ok {
		writeError(w, http.StatusNotFound, "web: checkpoint %d not found (not taken yet, or older than the history kept)", id)
		return
	}
	writeJSON(w, http.StatusOK, cp)
}

func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryLimit(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, TimelineResponse{Timeline: s.mon.Timeline(limit)}) // never nil: [] when empty
}

// queryLimit reads ?limit=N (a positive integer; absent: 0, everything
// kept), answering 400 itself when it is bad.
func queryLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	vals, present := r.URL.Query()["limit"]
	if !present {
		return 0, true
	}
	if len(vals) != 1 {
		writeError(w, http.StatusBadRequest, "web: limit given %d times", len(vals))
		return 0, false
	}
	n, err := strconv.Atoi(vals[0])
	if err != nil || n < 1 {
		writeError(w, http.StatusBadRequest, "web: limit %q is not a positive integer", vals[0])
		return 0, false
	}
	return n, true
}

func (s *Server) triggerCheckpoint(w http.ResponseWriter, r *http.Request) {
	if !s.controllable(w) {
		return
	}
	var req struct{}
	if !readJSON(w, r, &req, true) {
		return
	}
	release, ok := s.controlSlot(w)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := s.controlContext(w, r)
	defer cancel()
	start := time.Now()
	id, err := s.ctl.Checkpoint(ctx)
	if err != nil {
		s.controlFailed(w, r, "checkpoint", err)
		return
	}
	s.log.Info("web: checkpoint requested", "checkpoint", id, "remote", r.RemoteAddr, "took", time.Since(start))
	writeJSON(w, http.StatusOK, TriggerResponse{ID: id})
}

func (s *Server) savepoint(w http.ResponseWriter, r *http.Request) {
	if !s.controllable(w) {
		return
	}
	var req SavepointRequest
	if !readJSON(w, r, &req, false) {
		return
	}
	if err := snapshots.ValidateSavepointName(req.Name); err != nil {
		writeError(w, http.StatusBadRequest, "web: savepoint: %v", err)
		return
	}
	release, ok := s.controlSlot(w)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := s.controlContext(w, r)
	defer cancel()
	take := s.ctl.Savepoint
	if req.Stop {
		take = s.ctl.StopWithSavepoint
	}
	id, err := take(ctx, req.Name)
	if err != nil {
		s.controlFailed(w, r, fmt.Sprintf("savepoint %q", req.Name), err)
		return
	}
	s.log.Info("web: savepoint requested", "checkpoint", id, "savepoint", req.Name, "stop", req.Stop, "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, SavepointResponse{ID: id, Name: req.Name, Stopped: req.Stop})
}

// controllable answers 403 for a read-only server.
func (s *Server) controllable(w http.ResponseWriter) bool {
	if s.ctl == nil {
		writeError(w, http.StatusForbidden, "web: this server is read-only: it was started without a job to control")
		return false
	}
	return true
}

// controlSlot takes one of the slots of the control requests that may wait
// for the job at once; with none free the request gets 503.
func (s *Server) controlSlot(w http.ResponseWriter) (release func(), ok bool) {
	return s.slot(w, s.controls, "checkpoint and savepoint requests")
}

// controlContext bounds a control request by Config.RequestTimeout and
// lets its connection stay open that long.
func (s *Server) controlContext(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc) {
	rc := http.NewResponseController(w)
	// Errors mean the writer has no deadlines (a test recorder): nothing to move.
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.RequestTimeout + 10*time.Second))
	return context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
}

// controlFailed answers a failed checkpoint or savepoint request.
func (s *Server) controlFailed(w http.ResponseWriter, r *http.Request, what string, err error) {
	var jobErr *actors.JobError
	status := http.StatusServiceUnavailable
	switch {
	case errors.Is(err, snapshots.ErrInvalidSavepointName):
		status = http.StatusBadRequest
	case errors.Is(err, snapshots.ErrSavepointExists), errors.Is(err, coordinator.ErrFinishing),
		errors.Is(err, actors.ErrFinished), errors.Is(err, actors.ErrStopped), errors.As(err, &jobErr):
		status = http.StatusConflict
	case r.Context().Err() != nil:
		s.log.Debug("web: client left before its request ended", "request", what, "remote", r.RemoteAddr, "err", err)
		return
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, status, "web: %s: no answer within %v; it may still complete: %v", what, s.cfg.RequestTimeout, err)
		return
	}
	s.log.Info("web: request refused or failed", "request", what, "status", status, "remote", r.RemoteAddr, "err", err)
	writeError(w, status, "web: %s: %v", what, err)
}

// readJSON decodes the request's body, a single JSON object with only
// known fields, into v; an empty body is accepted when optional. It
// answers 400, 413 or 415 itself.
func readJSON(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, "web: Content-Type %q: want application/json", ct)
			return false
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			writeError(w, http.StatusRequestEntityTooLarge, "web: request body over %d bytes", maxBody)
		} else {
			writeError(w, http.StatusBadRequest, "web: reading the request body: %v", err)
		}
		return false
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return true
		}
		writeError(w, http.StatusBadRequest, "web: %s %s needs a JSON body", r.Method, r.URL.Path)
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "web: bad JSON body: %v", err)
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "web: bad JSON body: more than one value")
		return false
	}
	return true
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorResponse{Error: fmt.Sprintf("web: encoding the answer: %v", err)})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n')) // a failed write means the client left
}

// writeError answers {"error": ...} with status.
func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, ErrorResponse{Error: fmt.Sprintf(format, args...)})
}
