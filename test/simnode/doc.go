// Package simnode runs simulated worker nodes on the test cluster for the
// end-to-end suite: Node objects that kwok keeps Ready (hack/cluster/up.sh
// starts it, with the stages in hack/cluster/kwok-stages.yaml), each backed
// by a directory that the bootc simulator (bootc-sim) treats as the node's
// root and by a real strata-daemon process.
//
// Only bootc and the reboot are simulated. The daemon talks to the real API
// server, the simulator really pulls images and deploys them into the node's
// own ostree sysroot, and pods bound to the nodes are run and deleted by
// kwok, so cordons, drains and PodDisruptionBudgets are the real ones.
//
// A reboot works like this: the daemon's reboot command is
// `bootc-sim sim request-reboot`, which only leaves a request file in the
// node's root. The harness sees it, kills the daemon (SIGKILL, as a reboot
// would), makes the Node NotReady (it sets the annotation
// sim.strata.dev/rebooting, on which kwok posts Ready=False), runs
// `bootc-sim sim reboot` (the staged deployment is booted, with a new boot
// id), makes the Node Ready again and starts the daemon again.
//
// The request may be a soft reboot (bootc --apply --soft-reboot, or the
// nodes' systemctl soft-reboot): the harness then ends the daemon and
// the boot check as well and makes the Node NotReady while userspace
// restarts, but runs `bootc-sim sim soft-reboot`, which keeps the boot
// id and counts the soft reboot where `systemctl show -p
// SoftRebootsCount` reads it. Config's RebootDuration and
// SoftRebootDuration keep a node down as long as a real machine would.
// A test can also reboot a node nobody asked to reboot: Crash (power
// loss: nothing is finalized) or RebootUnplanned (another reboot
// manager: the shutdown finalizes an unlocked staged deployment).
//
// At every boot the harness also does what systemd does for Strata: when
// the booted image enables the boot check (rollout/bootcheck), it runs the
// image's own script, with bootc-sim as bootc and bootc-sim's systemctl
// (Systemctl), whose reboot is the same reboot request. An image with KubeletBrokenFile in
// its /etc broke the kubelet: the Node stays NotReady and the daemon, a
// pod on a real node, does not start, so only the boot check can bring
// the node back.
//
// Typical use in a spec:
//
//	sim, err := simnode.New(ctx, simnode.Config{
//		Kubeconfig:    kubeconfig,
//		Daemon:        daemonBinary,
//		BootcSim:      bootcSimBinary,
//		OriginalImage: "127.0.0.1:5000/strata/os-base@sha256:...",
//		Log:           GinkgoWriter,
//	})
//	DeferCleanup(func(ctx SpecContext) { Expect(sim.Stop(ctx)).To(Succeed()) })
//	nodes, err := sim.AddNodes(ctx, 3, map[string]string{"pool": "a"})
package simnode
