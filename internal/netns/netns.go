package netns

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Net is a private network of nodes, each in a namespace of its own.
type Net struct {
	hub   string
	nodes []Node
}

// Node is one namespace of a Net.
type Node struct {
	// NS is the namespace's name (ip netns).
	NS string
	// IP is the node's address, which exists only inside the Net.
	IP   string
	hubv string // the hub's end of the node's veth pair
}

// Available returns nil when this process can create network namespaces,
// or why it cannot.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("netns: the ip command (iproute2): %w", err)
	}
	name := "sfprobe" + suffix()
	if err := ip("netns", "add", name); err != nil {
		return err
	}
	return ip("netns", "del", name)
}

// New creates a network of n nodes. The caller must Close it.
func New(n int) (_ *Net, err error) {
	if n < 1 || n > 200 {
		return nil, fmt.Errorf("netns: %d nodes: want 1..200", n)
	}
	id := suffix()
	var b [2]byte
	_, _ = rand.Read(b[:])
	// 10.X.Y.0/24 with X in 200..249: away from the ranges a machine's own
	// networks and containers usually take, and private in any case.
	subnet := fmt.Sprintf("10.%d.%d.", 200+int(b[0])%50, b[1])
	net := &Net{hub: "sf" + id + "h"}
	defer func() {
		if err != nil {
			net.Close()
		}
	}()
	if err := ip("netns", "add", net.hub); err != nil {
		return nil, err
	}
	if err := run(
		[]string{"-n", net.hub, "link", "add", "br0", "type", "bridge"},
		[]string{"-n", net.hub, "link", "set", "br0", "up"},
	); err != nil {
		return nil, err
	}
	for i := range n {
		nd := Node{NS: fmt.Sprintf("sf%sn%d", id, i), IP: fmt.Sprintf("%s%d", subnet, i+1), hubv: fmt.Sprintf("v%d", i)}
		if err := ip("netns", "add", nd.NS); err != nil {
			return nil, err
		}
		net.nodes = append(net.nodes, nd)
		if err := run(
			[]string{"-n", net.hub, "link", "add", nd.hubv, "type", "veth", "peer", "name", "eth0", "netns", nd.NS},
			[]string{"-n", net.hub, "link", "set", nd.hubv, "master", "br0"},
			[]string{"-n", net.hub, "link", "set", nd.hubv, "up"},
			[]string{"-n", nd.NS, "addr", "add", nd.IP + "/24", "dev", "eth0"},
			[]string{"-n", nd.NS, "link", "set", "eth0", "up"},
			[]string{"-n", nd.NS, "link", "set", "lo", "up"},
		); err != nil {
			return nil, err
		}
	}
	return net, nil
}

// Node returns node i.
func (n *Net) Node(i int) Node { return n.nodes[i] }

// Command returns the command line that runs name with args inside node
// i's namespace.
func (n *Net) Command(i int, name string, args ...string) (string, []string) {
	return "ip", append([]string{"netns", "exec", n.nodes[i].NS, name}, args...)
}

// Cut makes node from drop every packet it sends to node to.
func (n *Net) Cut(from, to int) error {
	return ip("-n", n.nodes[from].NS, "route", "add", "blackhole", n.nodes[to].IP+"/32")
}

// Heal undoes Cut(from, to).
func (n *Net) Heal(from, to int) error {
	return ip("-n", n.nodes[from].NS, "route", "del", "blackhole", n.nodes[to].IP+"/32")
}

// Isolate takes node i's link to the bridge down (up false) or up again.
func (n *Net) Isolate(i int, down bool) error {
	state := "up"
	if down {
		state = "down"
	}
	return ip("-n", n.hub, "link", "set", n.nodes[i].hubv, state)
}

// Close deletes the namespaces, and with them the veth pairs and routes.
// Processes still running in them lose their network.
func (n *Net) Close() error {
	var errs []error
	for _, nd := range n.nodes {
		errs = append(errs, ip("netns", "del", nd.NS))
	}
	errs = append(errs, ip("netns", "del", n.hub))
	return errors.Join(errs...)
}

func suffix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}

func run(cmds ...[]string) error {
	for _, c := range cmds {
		if err := ip(c...); err != nil {
			return err
		}
	}
	return nil
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
