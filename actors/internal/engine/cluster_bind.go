package engine

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/remote"
	"github.com/snapflow/snapflow/internal/nodeauth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// bindWorkers is the coordinator's stream interceptor that binds a worker
// id to the node that registered it: a message that names a worker (its
// worker_id field: registrations, heartbeats, acknowledgements, declines,
// failures, finishes) is read only from the node whose key the id was made
// of (nodeauth.WorkerID), as the connection's handshake proved it. A batch
// with one that is not ends the stream, before any of its messages is
// delivered: a node of the cluster cannot speak for another node's tasks.
func bindWorkers(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		p, _ := nodeauth.PeerOf(ss.Context())
		return h(srv, &boundStream{ServerStream: ss, peer: p, log: log})
	}
}

type boundStream struct {
	grpc.ServerStream
	peer nodeauth.Peer
	log  *slog.Logger
}

func (s *boundStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	rm, ok := m.(*remote.RemoteMessage)
	if !ok {
		return nil
	}
	b := rm.GetMessageBatch()
	if b == nil {
		return nil
	}
	if typ, worker, ok := foreignWorker(b, s.peer.ID); !ok {
		if n := impersonations.Add(1); n&(n-1) == 0 || n%1000 == 0 {
			s.log.Warn("refused a message that names a worker of another node; the connection is closed",
				"peer", s.peer.ID, "type", typ, "claimed_worker", worker, "refused_so_far", n)
		}
		return status.Errorf(codes.PermissionDenied, "snapflow: node %s sent a %s for worker %q, which is not its own", s.peer.ID, typ, worker)
	}
	return nil
}

// impersonations counts the batches refused by bindWorkers.
var impersonations atomic.Uint64

// foreignWorker finds in b a message whose worker_id node does not own; it
// reports its type and id, and ok false, or ok true when there is none.
// Only the types with a worker_id field are decoded, so a data batch costs
// a lookup per type name, not per record.
func foreignWorker(b *remote.MessageBatch, node string) (typ, worker string, ok bool) {
	var fields []protoreflect.FieldDescriptor
	for i, name := range b.TypeNames {
		if f := workerField(name); f != nil {
			if fields == nil {
				fields = make([]protoreflect.FieldDescriptor, len(b.TypeNames))
			}
			fields[i] = f
		}
	}
	if fields == nil {
		return "", "", true
	}
	for _, e := range b.Envelopes {
		if int(e.TypeId) < 0 || int(e.TypeId) >= len(fields) || fields[e.TypeId] == nil {
			continue
		}
		name := b.TypeNames[e.TypeId]
		mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name))
		if err != nil || e.SerializerId != 0 {
			return name, "", false
		}
		msg := mt.New().Interface()
		if err := proto.Unmarshal(e.MessageData, msg); err != nil {
			return name, "", false
		}
		id := msg.ProtoReflect().Get(fields[e.TypeId]).String()
		if !nodeauth.OwnsWorker(node, id) {
			return name, id, false
		}
	}
	return "", "", true
}

// workerFields caches, by a message type's full name, its worker_id field
// (a nil descriptor for types without one).
var workerFields sync.Map

func workerField(name string) protoreflect.FieldDescriptor {
	if f, ok := workerFields.Load(name); ok {
		return f.(cachedField).fd
	}
	var f protoreflect.FieldDescriptor
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(name)); err == nil {
		if fd := mt.Descriptor().Fields().ByName("worker_id"); fd != nil && fd.Kind() == protoreflect.StringKind {
			f = fd
		}
	}
	workerFields.Store(name, cachedField{f})
	return f
}

type cachedField struct{ fd protoreflect.FieldDescriptor }
