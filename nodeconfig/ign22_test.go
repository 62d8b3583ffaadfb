package nodeconfig

import (
	"encoding/json"
	"strings"
	"testing"

	ign "github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/ignition/v2/config/validate"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/strata-dev/strata/api/v1alpha1"
	"github.com/strata-dev/strata/test/testconfigs"
)

// loadMachineConfig reads a MachineConfig manifest.
func loadMachineConfig(t testing.TB, path string) v1alpha1.MachineConfig {
	t.Helper()
	mc, err := testconfigs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// canonical is the JSON of an Ignition 3.5 config given as YAML or JSON,
// decoded strictly, so that configs compare by meaning.
func canonical(t testing.TB, doc string) string {
	t.Helper()
	raw, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	var cfg ign.Config
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	return canonicalConfig(t, cfg)
}

func canonicalConfig(t testing.TB, cfg ign.Config) string {
	t.Helper()
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestIgnition2Corpus translates the Ignition 2.2 MachineConfigs of the
// corpus (testdata/ignition-corpus, copied unchanged from
// ../shared/corpus/mco-real/strata). want is the 3.5 config each must
// translate to, in YAML for the units' sake; the renderer's
// TestIgnition2CorpusRenders renders them.
func TestIgnition2Corpus(t *testing.T) {
	tests := []struct {
		file string
		want string
	}{
		{
			// Files default to overwrite in 2.x; the unit without
			// contents is the base image's; enabling the units without
			// [Install] is a no-op, which both Ignitions only note.
			file: "02-mco-server-test-config-ign22.yaml",
			want: `
ignition:
  version: 3.5.0
storage:
  files:
    -
      contents:
        source: "data:,GROUP%3Dstable%0ASERVER%3Dhttp%3A%2F%2Flocalhost%3A32003%2Fv1%2Fupdate%0A"
      mode: 420
      overwrite: true
      path: /etc/coreos/update.conf
systemd:
  units:
    -
      dropins:
        -
          contents: |
              [Service]
              Environment="DOCKER_OPTS=--log-opt max-size=50m --log-opt max-file=3
          name: 10-dockeropts.conf
      enabled: true
      name: docker.service
    -
      contents: |
          [Unit]
          Description=etcd (System Application Container) TLS assets
          ConditionFileNotEmpty=|!/etc/ssl/etcd/system:etcd-server:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.crt
          ConditionFileNotEmpty=|!/etc/ssl/etcd/system:etcd-server:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.key
          ConditionFileNotEmpty=|!/etc/ssl/etcd/system:etcd-peer:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.crt
          ConditionFileNotEmpty=|!/etc/ssl/etcd/system:etcd-peer:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.key
          Requires=docker.service
          After=docker.service
          [Service]
          Type=oneshot
          RemainAfterExit=yes
          Environment="SIGNER_IMAGE=registry.svc.ci.openshift.org/openshift/origin-v4.0:kube-client-agent"
          ExecStart=/usr/bin/docker \
            run \
              --rm \
              --volume /etc/ssl/etcd:/etc/ssl/etcd:rw \
            "${SIGNER_IMAGE}" \
              request \
                --orgname=system:etcd-servers \
                --cacrt=/etc/ssl/etcd/root-ca.crt \
                --assetsdir=/etc/ssl/etcd \
                --address=https://my-test-cluster-api.installer.team.coreos.systems:6443 \
                --dnsnames=localhost,*.kube-etcd.kube-system.svc.cluster.local,kube-etcd-client.kube-system.svc.cluster.local,my-test-cluster-etcd-0.installer.team.coreos.systems,my-test-cluster-etcd-1.installer.team.coreos.systems,my-test-cluster-etcd-2.installer.team.coreos.systems \
                --commonname=system:etcd-server:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems \
                --ipaddrs=127.0.0.1 \
          ExecStart=/usr/bin/docker \
            run \
              --rm \
              --volume /etc/ssl/etcd:/etc/ssl/etcd:rw \
            "${SIGNER_IMAGE}" \
              request \
                --orgname=system:etcd-peers \
                --cacrt=/etc/ssl/etcd/root-ca.crt \
                --assetsdir=/etc/ssl/etcd \
                --address=https://my-test-cluster-api.installer.team.coreos.systems:6443 \
                --dnsnames=*.kube-etcd.kube-system.svc.cluster.local,kube-etcd-client.kube-system.svc.cluster.local,my-test-cluster-etcd-0.installer.team.coreos.systems,my-test-cluster-etcd-1.installer.team.coreos.systems,my-test-cluster-etcd-2.installer.team.coreos.systems \
                --commonname=system:etcd-peer:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems \
          ExecStart=/bin/chown etcd:etcd /etc/ssl/etcd/system:etcd-server:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.crt
          ExecStart=/bin/chown etcd:etcd /etc/ssl/etcd/system:etcd-server:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.key
          ExecStart=/bin/chown etcd:etcd /etc/ssl/etcd/system:etcd-peer:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.crt
          ExecStart=/bin/chown etcd:etcd /etc/ssl/etcd/system:etcd-peer:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.key
      enabled: true
      name: etcd-member-tls.service
    -
      contents: |
          [Unit]
          Description=etcd (System Application Container)
          Documentation=https://github.com/coreos/etcd
          Requires=etcd-member-tls.service
          After=etcd-member-tls.service
          [Service]
          Restart=on-failure
          RestartSec=10s
          TimeoutStartSec=0
          LimitNOFILE=40000
          Environment="ETCD_IMAGE=quay.io/coreos/etcd:v3.3.10"
          ExecStartPre=-/usr/bin/docker rm etcd-member
          ExecStartPre=/usr/bin/mkdir --parents /var/lib/etcd
          ExecStartPre=/usr/bin/mkdir --parents /run/etcd
          ExecStartPre=/usr/bin/chown etcd /var/lib/etcd
          ExecStartPre=/usr/bin/chown etcd /run/etcd
          ExecStart= /usr/bin/bash -c " \
              /usr/bin/docker \
                run \
                  --rm \
                  --name etcd-member \
                  --volume /run/systemd/system:/run/systemd/system:ro \
                  --volume /etc/ssl/certs:/etc/ssl/certs:ro \
                  --volume /etc/ssl/etcd:/etc/ssl/etcd:ro \
                  --volume /var/lib/etcd:/var/lib/etcd:rw \
                  --volume /etc/ssl/certs:/etc/ssl/certs:ro \
                  --env 'ETCD_NAME=%m' \
                  --env ETCD_DATA_DIR=/var/lib/etcd \
                  --network host \
                  --user=$(id --user etcd) \
                '${ETCD_IMAGE}' \
                  etcd \
                    --name=my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems \
                    --advertise-client-urls=https://my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems:2379 \
                    --cert-file=/etc/ssl/etcd/system:etcd-server:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.crt \
                    --key-file=/etc/ssl/etcd/system:etcd-server:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.key \
                    --trusted-ca-file=/etc/ssl/etcd/ca.crt \
                    --client-cert-auth=true \
                    --peer-cert-file=/etc/ssl/etcd/system:etcd-peer:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.crt \
                    --peer-key-file=/etc/ssl/etcd/system:etcd-peer:my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems.key \
                    --peer-trusted-ca-file=/etc/ssl/etcd/ca.crt \
                    --peer-client-cert-auth=true \
                    --initial-cluster='my-test-cluster-etcd-0.installer.team.coreos.systems=https://my-test-cluster-etcd-0.installer.team.coreos.systems:2380,my-test-cluster-etcd-1.installer.team.coreos.systems=https://my-test-cluster-etcd-1.installer.team.coreos.systems:2380,my-test-cluster-etcd-2.installer.team.coreos.systems=https://my-test-cluster-etcd-2.installer.team.coreos.systems:2380' \
                    --initial-advertise-peer-urls=https://my-test-cluster-etcd-{{.etcd_index}}.installer.team.coreos.systems:2380 \
                    --listen-client-urls=https://0.0.0.0:2379 \
                    --listen-peer-urls=https://0.0.0.0:2380 \
              "
          [Install]
          WantedBy=multi-user.target
      enabled: true
      name: etcd-member.service
    -
      contents: |
          [Service]
          ExecStart=/usr/bin/env bash -c \
            " \
              if grep rhcos /etc/os-release > /dev/null; \
              then \
                echo CGROUP_DRIVER_FLAG=--cgroup-driver=systemd > /etc/kubernetes/kubelet-workaround; \
                mount -o remount,rw /sys/fs/cgroup; \
                ln --symbolic /sys/fs/cgroup/cpu,cpuacct /sys/fs/cgroup/cpuacct,cpu; \
              fi \
            "
      name: kubelet-workaround.service
    -
      contents: |
          [Unit]
          Description=Kubernetes Kubelet
          Wants=rpc-statd.service
          Requires=docker.service kubelet-workaround.service
          After=docker.service kubelet-workaround.service
          [Service]
          Environment="KUBELET_IMAGE=openshift/origin-node"
          EnvironmentFile=-/etc/kubernetes/kubelet-workaround
          ExecStartPre=/bin/mkdir --parents /etc/kubernetes/manifests
          ExecStartPre=/bin/mkdir --parents /etc/kubernetes/checkpoint-secrets
          ExecStartPre=/bin/mkdir --parents /etc/kubernetes/cni/net.d
          ExecStartPre=/bin/mkdir --parents /run/kubelet
          ExecStartPre=/bin/mkdir --parents /var/lib/cni
          ExecStartPre=/bin/mkdir --parents /var/lib/kubelet/pki
          ExecStartPre=/usr/bin/bash -c "gawk '/certificate-authority-data/ {print $2}' /etc/kubernetes/kubeconfig | base64 --decode > /etc/kubernetes/ca.crt"
          ExecStart=/usr/bin/docker \
            run \
              --rm \
              --net host \
              --pid host \
              --privileged \
              --volume /dev:/dev:rw \
              --volume /sys:/sys:ro \
              --volume /var/run:/var/run:rw \
              --volume /var/lib/cni/:/var/lib/cni:rw \
              --volume /var/lib/docker/:/var/lib/docker:rw \
              --volume /var/lib/kubelet/:/var/lib/kubelet:shared \
              --volume /var/log:/var/log:shared \
              --volume /etc/kubernetes:/etc/kubernetes:ro \
              --entrypoint /usr/bin/hyperkube \
            "${KUBELET_IMAGE}" \
              kubelet \
                --bootstrap-kubeconfig=/etc/kubernetes/kubeconfig \
                --kubeconfig=/var/lib/kubelet/kubeconfig \
                --rotate-certificates \
                --cni-conf-dir=/etc/kubernetes/cni/net.d \
                --cni-bin-dir=/var/lib/cni/bin \
                --network-plugin=cni \
                --lock-file=/var/run/lock/kubelet.lock \
                --exit-on-lock-contention \
                --pod-manifest-path=/etc/kubernetes/manifests \
                --node-labels=node-role.kubernetes.io/etcd \
                --minimum-container-ttl-duration=6m0s \
                --cluster-dns=10.3.0.10 \
                --cluster-domain=cluster.local \
                --cloud-provider=aws \
                 \
                --register-with-taints=node-role.kubernetes.io/etcd=:NoSchedule \
                $CGROUP_DRIVER_FLAG
          Restart=always
          RestartSec=10
          [Install]
          WantedBy=multi-user.target
      enabled: true
      name: kubelet.service
    -
      mask: true
      name: locksmith.service
`,
		},
		{
			file: "06-mco-doc-99-worker-ssh-ign22.yaml",
			want: `
ignition:
  version: 3.5.0
passwd:
  users:
  - name: core
    sshAuthorizedKeys:
    - ssh-rsa ABC123....
    - ssh-ed25519 XYZ7890....
`,
		},
		{
			file: "14-cnf-disable-chronyd-ign22.yaml",
			want: `
ignition:
  version: 3.5.0
systemd:
  units:
    - contents: |
        [Unit]
        Description=NTP client/server
        Documentation=man:chronyd(8) man:chrony.conf(5)
        After=ntpdate.service sntp.service ntpd.service
        Conflicts=ntpd.service systemd-timesyncd.service
        ConditionCapability=CAP_SYS_TIME

        [Service]
        Type=forking
        PIDFile=/run/chrony/chronyd.pid
        EnvironmentFile=-/etc/sysconfig/chronyd
        ExecStart=/usr/sbin/chronyd $OPTIONS
        ExecStartPost=/usr/libexec/chrony-helper update-daemon
        PrivateTmp=yes
        ProtectHome=yes
        ProtectSystem=full

        [Install]
        WantedBy=multi-user.target
      enabled: false
      name: chronyd.service
`,
		},
		{
			// "data:," is an empty file either way.
			file: "19-telco-sctp-worker-ign22.yaml",
			want: `
ignition:
  version: 3.5.0
storage:
  files:
    - path: /etc/modprobe.d/sctp-blacklist.conf
      mode: 420
      overwrite: true
      contents:
        source: data:,
    - path: /etc/modules-load.d/sctp-load.conf
      mode: 420
      overwrite: true
      contents:
        source: data:text/plain;charset=utf-8,sctp
`,
		},
		{
			file: "31-sap-75-worker-sdi-ign22.yaml",
			want: `
ignition:
  version: 3.5.0
storage:
  files:
    - path: /etc/modules-load.d/sdi-dependencies.conf
      mode: 420
      overwrite: true
      contents:
        source: "data:text/plain;charset=utf-8;base64,bmZzZApuZnN2NAppcF90YWJsZXMKaXB0X1JFRElSRUNUCmlwdF9vd25lcgo="
systemd:
  units:
    - contents: |
        [Unit]
        Description=Pre-load kernel modules for SAP Data Intelligence
        After=network.target

        [Service]
        Type=oneshot
        ExecStart=/usr/sbin/modprobe iptable_nat
        ExecStart=/usr/sbin/modprobe iptable_filter
        RemainAfterExit=yes

        [Install]
        WantedBy=multi-user.target
      enabled: true
      name: sdi-modules-load.service
`,
		},
	}
	for _, tt := range tests {
		t.Run(strings.TrimSuffix(tt.file, ".yaml"), func(t *testing.T) {
			mc := loadMachineConfig(t, "testdata/ignition-corpus/"+tt.file)
			cfg, err := ParseIgnition(mc.Spec.Config.Raw)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := canonicalConfig(t, cfg), canonical(t, tt.want); got != want {
				t.Errorf("translated to\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestIgnition2Translation pins each rule of the translation (see
// ign22.go) on small configs.
func TestIgnition2Translation(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{
			name: "a file is overwritten unless appended to; no source is an empty file",
			raw: `{"ignition":{"version":"2.2.0"},"storage":{"files":[
				{"filesystem":"root","path":"/etc/a"},
				{"filesystem":"root","path":"/etc/b","overwrite":false},
				{"filesystem":"root","path":"/etc/c","overwrite":true,"contents":{"source":"data:,c"}}]}}`,
			want: `{"ignition":{"version":"3.5.0"},"storage":{"files":[
				{"path":"/etc/a","overwrite":true,"contents":{"source":"data:,"}},
				{"path":"/etc/b","overwrite":false},
				{"path":"/etc/c","overwrite":true,"contents":{"source":"data:,c"}}]}}`,
		},
		{
			name: "append: the contents are appended, an empty source appends nothing",
			raw: `{"ignition":{"version":"2.2.0"},"storage":{"files":[
				{"filesystem":"root","path":"/etc/a","append":true,"mode":384,"contents":{"source":"data:,more","compression":"","verification":{"hash":"sha512-` + strings.Repeat("0", 128) + `"}}},
				{"filesystem":"root","path":"/etc/b","append":true}]}}`,
			want: `{"ignition":{"version":"3.5.0"},"storage":{"files":[
				{"path":"/etc/a","overwrite":false,"mode":384,"append":[{"source":"data:,more","verification":{"hash":"sha512-` + strings.Repeat("0", 128) + `"}}]},
				{"path":"/etc/b","overwrite":false}]}}`,
		},
		{
			name: "owners, compression, directories and links",
			raw: `{"ignition":{"version":"2.2.0"},"storage":{
				"files":[{"filesystem":"root","path":"/etc/a","user":{"id":1000},"group":{"name":"wheel"},"contents":{"source":"data:;base64,H4sIAAAAAAAC/0sEAOnAw3wBAAAA","compression":"gzip"}}],
				"directories":[{"filesystem":"root","path":"/etc/d","mode":448,"overwrite":true,"user":{"name":"core"}}],
				"links":[{"filesystem":"root","path":"/etc/s","target":"/etc/a"},{"filesystem":"root","path":"/etc/h","target":"/etc/a","hard":true,"overwrite":true}]}}`,
			want: `{"ignition":{"version":"3.5.0"},"storage":{
				"files":[{"path":"/etc/a","overwrite":true,"user":{"id":1000},"group":{"name":"wheel"},"contents":{"source":"data:;base64,H4sIAAAAAAAC/0sEAOnAw3wBAAAA","compression":"gzip"}}],
				"directories":[{"path":"/etc/d","mode":448,"overwrite":true,"user":{"name":"core"}}],
				"links":[{"path":"/etc/s","target":"/etc/a"},{"path":"/etc/h","target":"/etc/a","hard":true,"overwrite":true}]}}`,
		},
		{
			name: "units: enabled wins over the deprecated enable; mask false and empty contents are unset",
			raw: `{"ignition":{"version":"2.2.0"},"systemd":{"units":[
				{"name":"a.service","enable":true},
				{"name":"b.service","enable":true,"enabled":false},
				{"name":"c.service","mask":false,"contents":"","dropins":[{"name":"10-x.conf","contents":""},{"name":"20-y.conf","contents":"[Service]\n"}]},
				{"name":"d.service","mask":true}]}}`,
			want: `{"ignition":{"version":"3.5.0"},"systemd":{"units":[
				{"name":"a.service","enabled":true},
				{"name":"b.service","enabled":false},
				{"name":"c.service","dropins":[{"name":"10-x.conf"},{"name":"20-y.conf","contents":"[Service]\n"}]},
				{"name":"d.service","mask":true}]}}`,
		},
		{
			name: "users and groups are translated field by field, for Strata's own rules to judge",
			raw: `{"ignition":{"version":"2.2.0"},"passwd":{
				"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]},{"name":"bob","passwordHash":"$6$x","uid":1001,"groups":["wheel"],"noCreateHome":true,"shell":"/bin/sh"}],
				"groups":[{"name":"g","gid":1002,"system":true}]}}`,
			want: `{"ignition":{"version":"3.5.0"},"passwd":{
				"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA"]},{"name":"bob","passwordHash":"$6$x","uid":1001,"groups":["wheel"],"noCreateHome":true,"shell":"/bin/sh"}],
				"groups":[{"name":"g","gid":1002,"system":true}]}}`,
		},
		{
			name: "2.0 and 2.1 have no unset mode or owner: what is not written stays unset",
			raw: `{"ignition":{"version":"2.1.0"},"storage":{"files":[
				{"filesystem":"root","path":"/etc/a","contents":{"source":"data:,a"}},
				{"filesystem":"root","path":"/etc/b","mode":256,"user":{"id":0},"contents":{"source":"data:,b"}}]}}`,
			want: `{"ignition":{"version":"3.5.0"},"storage":{"files":[
				{"path":"/etc/a","overwrite":true,"contents":{"source":"data:,a"}},
				{"path":"/etc/b","overwrite":true,"mode":256,"user":{"id":0},"contents":{"source":"data:,b"}}]}}`,
		},
		{
			name: "2.0",
			raw: `{"ignition":{"version":"2.0.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/a","contents":{"source":"data:,a"}}]},
				"systemd":{"units":[{"name":"a.service","enable":true,"contents":"[Install]\nWantedBy=multi-user.target\n"}]}}`,
			want: `{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/etc/a","overwrite":true,"contents":{"source":"data:,a"}}]},
				"systemd":{"units":[{"name":"a.service","enabled":true,"contents":"[Install]\nWantedBy=multi-user.target\n"}]}}`,
		},
		{
			name: "2.3",
			raw:  `{"ignition":{"version":"2.3.0","timeouts":{"httpTotal":10}},"storage":{"files":[{"filesystem":"root","path":"/etc/a","contents":{"source":"data:,a"}}]}}`,
			want: `{"ignition":{"version":"3.5.0","timeouts":{"httpTotal":10}},"storage":{"files":[{"path":"/etc/a","overwrite":true,"contents":{"source":"data:,a"}}]}}`,
		},
		{
			name: "2.4",
			raw:  `{"ignition":{"version":"2.4.0","proxy":{"httpsProxy":"https://proxy","noProxy":["example.com"]}},"storage":{"links":[{"filesystem":"root","path":"/etc/l","target":"/etc/t"}]}}`,
			want: `{"ignition":{"version":"3.5.0","proxy":{"httpsProxy":"https://proxy","noProxy":["example.com"]}},"storage":{"links":[{"path":"/etc/l","target":"/etc/t"}]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseIgnition([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := canonicalConfig(t, cfg), canonical(t, tt.want); got != want {
				t.Errorf("translated to\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestIgnition2Refused: what cannot be translated is refused by its 2.x
// path, with what to write instead; what translates but Strata refuses in
// any config is refused at the same path by the same rules.
func TestIgnition2Refused(t *testing.T) {
	v22 := func(body string) string { return `{"ignition":{"version":"2.2.0"},` + body + `}` }
	tests := []struct {
		name string
		raw  string
		want []string // in order; each must be a prefix of one error
	}{
		{name: "file on another filesystem", raw: v22(`"storage":{"filesystems":[{"name":"data","mount":{"device":"/dev/sdb1","format":"xfs"}}],"files":[{"filesystem":"data","path":"/a","contents":{"source":"data:,a"}}]}`),
			want: []string{
				`spec.config.storage.filesystems[0]: Forbidden: disk layout cannot be changed by an OS image`,
				`spec.config.storage.files[0].filesystem: Forbidden: only the "root" filesystem translates to Ignition 3`}},
		{name: "undefined filesystem", raw: v22(`"storage":{"directories":[{"filesystem":"oem","path":"/d"}],"links":[{"filesystem":"oem","path":"/l","target":"/t"}]}`),
			want: []string{`spec.config.storage.directories[0].filesystem: Forbidden`, `spec.config.storage.links[0].filesystem: Forbidden`}},
		{name: "disks and raid", raw: v22(`"storage":{"disks":[{"device":"/dev/sda"}],"raid":[{"name":"md0","level":"raid1","devices":["/dev/sda","/dev/sdb"]}]}`),
			want: []string{`spec.config.storage.disks[0]: Forbidden`, `spec.config.storage.raid[0]: Forbidden`}},
		{name: "networkd", raw: v22(`"networkd":{"units":[{"name":"10-eth0.network","contents":"[Match]\nName=eth0\n"}]}`),
			want: []string{`spec.config.networkd.units[0]: Forbidden: Ignition 3 has no networkd section: write the unit as a file at /etc/systemd/network/10-eth0.network in storage.files`}},
		{name: "user create", raw: v22(`"passwd":{"users":[{"name":"bob","create":{"shell":"/bin/sh"}}]}`),
			want: []string{`spec.config.passwd.users[0].create: Forbidden: creating users is not supported`}},
		{name: "config append", raw: `{"ignition":{"version":"2.2.0","config":{"append":[{"source":"https://example.com/a.ign"}]}}}`,
			want: []string{`spec.config.ignition.config.append[0]: Forbidden: the image is built once, offline`}},
		{name: "replace, by Strata's own rule", raw: `{"ignition":{"version":"2.2.0","config":{"replace":{"source":"https://example.com/a.ign"}}}}`,
			want: []string{`spec.config.ignition.config.replace: Forbidden`}},
		{name: "remote source, by Strata's own rule", raw: v22(`"storage":{"files":[{"filesystem":"root","path":"/etc/a","contents":{"source":"https://example.com/a"}}]}`),
			want: []string{`spec.config.storage.files[0].contents.source: Invalid value: "https://example.com/a": remote sources (https) are not supported`}},
		{name: "password hash, by Strata's own rule", raw: v22(`"passwd":{"users":[{"name":"bob","passwordHash":"$6$x"}]}`),
			want: []string{`spec.config.passwd.users[0].passwordHash: Forbidden`}},
		{name: "unknown key", raw: v22(`"storage":{"files":[{"filesystem":"root","path":"/etc/a","mdoe":420}]}`),
			want: []string{`spec.config.storage.files[0].mdoe: Invalid value: "mdoe": key unknown to Ignition 2.2.0, which would ignore it and its value; did you mean "mode"?`}},
		{name: "key of a later 2.x version", raw: `{"ignition":{"version":"2.1.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/a","mode":420,"overwrite":true}]}}`,
			want: []string{`spec.config.storage.files[0].overwrite: Invalid value: "overwrite": key unknown to Ignition 2.1.0`}},
		{name: "Ignition 2.x's own validation, by position", raw: v22(`"storage":{"files":[{"filesystem":"root","path":"/etc/a"},{"filesystem":"root","path":"etc/a"}]}`),
			want: []string{`spec.config.storage.files[1].path: Invalid value: "etc/a": Ignition 2.2.0: path not absolute`}},
		{name: "Ignition 2.x's own validation, deep", raw: v22(`"storage":{"files":[{"filesystem":"root","path":"/etc/a","contents":{"source":"data:,a","verification":{"hash":"md5-x"}}}]}`),
			want: []string{`spec.config.storage.files[0].contents.verification.hash: Invalid value: "md5-x": Ignition 2.2.0: `}},
		{name: "append and overwrite", raw: v22(`"storage":{"files":[{"filesystem":"root","path":"/etc/a","append":true,"overwrite":true}]}`),
			want: []string{`spec.config.storage.files[0].overwrite: Invalid value: true: Ignition 2.2.0: cannot set both append and overwrite to true`}},
		{name: "2.5 is experimental", raw: `{"ignition":{"version":"2.5.0-experimental"}}`,
			want: []string{`spec.config.ignition.version: Invalid value: "2.5.0-experimental": unsupported config version; Strata reads Ignition 3.0.0 to 3.5.0, and 2.0.0 to 2.4.0 translated to 3.5.0`}},
		{name: "no such version", raw: `{"ignition":{"version":"2.2.1"}}`,
			want: []string{`spec.config.ignition.version: Invalid value: "2.2.1": unsupported config version`}},
		{name: "no version", raw: `{"ignitionVersion":1}`,
			want: []string{`spec.config.ignition.version: Required value: an Ignition config needs ignition.version`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateMachineConfigSpec(spec(tt.raw), field.NewPath("spec"))
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tt.want), errs.ToAggregate())
			}
			for i, want := range tt.want {
				if got := errs[i].Error(); !strings.HasPrefix(got, want) {
					t.Errorf("error %d = %q\nwant prefix %q", i, got, want)
				}
			}
		})
	}
}

// FuzzParseIgnition2 checks the 2.x translation on any input: no panic,
// and what it accepts is a valid 3.5 config that parses back to itself.
func FuzzParseIgnition2(f *testing.F) {
	// Not 02: the fuzzer minimises each new input, which takes long for
	// a large one.
	for _, name := range []string{"06-mco-doc-99-worker-ssh-ign22.yaml", "14-cnf-disable-chronyd-ign22.yaml", "19-telco-sctp-worker-ign22.yaml", "31-sap-75-worker-sdi-ign22.yaml"} {
		f.Add(loadMachineConfig(f, "testdata/ignition-corpus/"+name).Spec.Config.Raw)
	}
	f.Add([]byte(`{"ignition":{"version":"2.0.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/a","contents":{"source":"data:,a","verification":{"hash":"sha512-00"}}}]}}`))
	f.Add([]byte(`{"ignition":{"version":"2.1.0"},"storage":{"directories":[{"filesystem":"root","path":"/etc/d"}]},"passwd":{"users":[{"name":"a","create":{}}]}}`))
	f.Add([]byte(`{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/a","append":true,"contents":{"source":"data:,x"}}]}}`))
	f.Add([]byte(`{"ignition":{"version":"2.4.0"},"networkd":{"units":[{"name":"a.network"}]},"systemd":{"units":[{"name":"a.service","enable":true,"mask":true}]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, _, err := parseIgnition(raw)
		if err != nil {
			return
		}
		if cfg.Ignition.Version != ign.MaxVersion.String() {
			t.Fatalf("version %q", cfg.Ignition.Version)
		}
		if rpt := validate.ValidateWithContext(cfg, nil); rpt.IsFatal() {
			t.Fatalf("accepted an invalid config: %v", rpt)
		}
		again, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		back, _, err := parseIgnition(again)
		if err != nil {
			t.Fatalf("the translation does not parse: %v\n%s", err, again)
		}
		if a, b := canonicalConfig(t, cfg), canonicalConfig(t, back); a != b {
			t.Fatalf("the translation parses to another config:\n%s\n%s", a, b)
		}
	})
}
