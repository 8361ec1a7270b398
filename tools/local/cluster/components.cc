#include "tools/local/cluster/components.h"

#include "tools/local/cluster/network.h"

namespace mf::local {
namespace fs = std::filesystem;

fs::path ComponentKubeconfig(const fs::path& data_dir, const std::string& component) {
  return data_dir / "kubeconfigs" / (component + ".kubeconfig");
}
fs::path HostBrokerSocket(const fs::path& data_dir) { return data_dir / "run" / "host.sock"; }
fs::path AuditPolicyPath(const fs::path& data_dir) { return data_dir / "audit-policy.yaml"; }

std::string AuditPolicyYaml() {
  return "apiVersion: audit.k8s.io/v1\n"
         "kind: Policy\n"
         "omitStages: [RequestReceived]\n"
         "rules:\n"
         // Every request of a workload's ServiceAccount, reads and leases too: what an operator
         // calls is what its RBAC must grant (tests compare the two).
         "- level: Metadata\n"
         "  userGroups: [system:serviceaccounts]\n"
         "- level: None\n"
         "  nonResourceURLs: [/healthz*, /livez*, /readyz*, /version, /openapi*]\n"
         "- level: None\n"
         "  resources: [{group: coordination.k8s.io, resources: [leases]}]\n"
         "- level: None\n"
         "  verbs: [get, list, watch]\n"
         "- level: Metadata\n";
}

std::vector<ComponentSpec> ControlPlaneComponents(const ControlPlaneLayout& l) {
  const fs::path& d = l.data_dir;
  const ClusterPki& pki = l.pki;
  auto bin = [&](const char* name) { return (l.go_bin_dir / name).string(); };
  auto log = [&](const char* name) { return d / "logs" / (std::string(name) + ".log"); };
  const std::string etcd_client = "http://127.0.0.1:" + std::to_string(kEtcdClientPort);
  const std::string etcd_peer = "http://127.0.0.1:" + std::to_string(kEtcdPeerPort);
  const std::string ca = pki.Certificate("ca").string();

  std::vector<ComponentSpec> out;
  out.push_back(
      {"etcd",
       {bin("etcd"), "--name=local", "--data-dir=" + (d / "etcd").string(), "--listen-client-urls=" + etcd_client,
        "--advertise-client-urls=" + etcd_client, "--listen-peer-urls=" + etcd_peer,
        "--initial-advertise-peer-urls=" + etcd_peer, "--initial-cluster=local=" + etcd_peer, "--listen-metrics-urls=",
        // A local cluster survives process crashes (the page cache holds every write),
        // not power loss; fsync per write would make every API write wait on the disk.
        "--unsafe-no-fsync=true", "--log-level=warn", "--quota-backend-bytes=2147483648"},
       log("etcd")});
  out.push_back({"kube-apiserver",
                 {bin("kube-apiserver"),
                  "--etcd-servers=" + etcd_client,
                  "--bind-address=0.0.0.0",
                  "--secure-port=" + std::to_string(kApiServerPort),
                  std::string("--advertise-address=") + kNodeIp,
                  "--tls-cert-file=" + pki.Certificate("apiserver").string(),
                  "--tls-private-key-file=" + pki.Key("apiserver").string(),
                  "--client-ca-file=" + ca,
                  std::string("--service-cluster-ip-range=") + kServiceCidr,
                  "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                  "--service-account-key-file=" + pki.ServiceAccountPublicKey().string(),
                  "--service-account-signing-key-file=" + pki.ServiceAccountKey().string(),
                  "--authorization-mode=Node,RBAC",
                  "--enable-admission-plugins=NodeRestriction",
                  "--allow-privileged=true",
                  "--kubelet-client-certificate=" + pki.Certificate("apiserver-kubelet-client").string(),
                  "--kubelet-client-key=" + pki.Key("apiserver-kubelet-client").string(),
                  "--kubelet-certificate-authority=" + ca,
                  "--kubelet-preferred-address-types=InternalIP",
                  "--audit-policy-file=" + AuditPolicyPath(d).string(),
                  "--audit-log-path=" + (d / "logs" / "audit.log").string(),
                  "--audit-log-maxsize=100",
                  "--audit-log-maxbackup=1",
                  "--profiling=false",
                  "--v=1"},
                 log("kube-apiserver")});
  out.back().argv.insert(out.back().argv.end(), l.apiserver_flags.begin(), l.apiserver_flags.end());
  const std::string kcm_kubeconfig = ComponentKubeconfig(d, "kube-controller-manager").string();
  out.push_back({"kube-controller-manager",
                 {bin("kube-controller-manager"), "--kubeconfig=" + kcm_kubeconfig,
                  "--authentication-kubeconfig=" + kcm_kubeconfig, "--authorization-kubeconfig=" + kcm_kubeconfig,
                  "--bind-address=127.0.0.1", "--leader-elect=false", "--use-service-account-credentials=true",
                  "--service-account-private-key-file=" + pki.ServiceAccountKey().string(), "--root-ca-file=" + ca,
                  "--cluster-signing-cert-file=" + ca, "--cluster-signing-key-file=" + pki.Key("ca").string(),
                  std::string("--service-cluster-ip-range=") + kServiceCidr, "--profiling=false", "--v=1"},
                 log("kube-controller-manager")});
  // Their defaults (20 and 50 requests/s) would take many minutes to create and bind ~15,000 pods.
  const std::vector<std::string> bulk_rate_limits = {"--kube-api-qps=500", "--kube-api-burst=1000"};
  if (l.simulate_pods) out.back().argv.insert(out.back().argv.end(), bulk_rate_limits.begin(), bulk_rate_limits.end());
  const std::string scheduler_kubeconfig = ComponentKubeconfig(d, "kube-scheduler").string();
  out.push_back(
      {"kube-scheduler",
       {bin("kube-scheduler"), "--kubeconfig=" + scheduler_kubeconfig,
        "--authentication-kubeconfig=" + scheduler_kubeconfig, "--authorization-kubeconfig=" + scheduler_kubeconfig,
        "--bind-address=127.0.0.1", "--leader-elect=false", "--profiling=false", "--v=1"},
       log("kube-scheduler")});
  if (l.simulate_pods) out.back().argv.insert(out.back().argv.end(), bulk_rate_limits.begin(), bulk_rate_limits.end());
  std::vector<std::string> agent = {
      l.self_binary.string(),       "node-agent",
      "--data-dir=" + d.string(),   "--kubeconfig=" + ComponentKubeconfig(d, "node").string(),
      "--node-name=" + l.node_name, "--log-level=" + l.log_level};
  if (!l.image_map.empty()) agent.push_back("--image-map=" + l.image_map);
  std::string resources;
  for (const auto& [name, count] : l.extended_resources) {
    resources += (resources.empty() ? "" : ",") + name + "=" + std::to_string(count);
  }
  if (!resources.empty()) agent.push_back("--extended-resources=" + resources);
  if (l.simulate_pods) agent.push_back("--simulate-pods");
  out.push_back({"node-agent", std::move(agent), log("node-agent")});
  return out;
}

}  // namespace mf::local
