// Package netns builds small private networks out of Linux network
// namespaces for the partition tests: a hub namespace holding a bridge, and
// one namespace per node joined to it by a veth pair, with an address of a
// random private /24 that exists only inside them. Nothing the nodes send
// leaves their namespaces.
//
// Links are cut by routes inside the sender's namespace: Cut(a, b) makes a
// drop everything it sends to b (a blackhole route to b's address), which
// TCP on either side sees as silence, not as a refusal; Heal removes it.
// Cutting both directions partitions two nodes; one direction is an
// asymmetric cut. Isolate cuts a node's link to the bridge altogether.
//
// Creating namespaces needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and the
// ip command of iproute2; Available says whether this machine can.
package netns
