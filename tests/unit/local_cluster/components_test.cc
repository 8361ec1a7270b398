// What `modelfleet-local up` runs, checked as data: the flags that make the control plane a real
// one (authorization, admission, TLS, audit) and keep it on the cluster's own network.
#include "tools/local/cluster/components.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace mf::local {
namespace {

ControlPlaneLayout Layout() {
  ControlPlaneLayout l;
  l.data_dir = "/d";
  l.go_bin_dir = "/b";
  l.self_binary = "/bin/modelfleet-local";
  l.pki.dir = "/d/pki";
  l.extended_resources = {{"nvidia.com/gpu", 4}, {"example.com/fpga", 1}};
  return l;
}

const ComponentSpec& Find(const std::vector<ComponentSpec>& all, const std::string& name) {
  auto it = std::find_if(all.begin(), all.end(), [&](const ComponentSpec& c) { return c.name == name; });
  EXPECT_NE(it, all.end()) << name;
  return *it;
}

bool Has(const ComponentSpec& c, const std::string& arg) {
  return std::find(c.argv.begin(), c.argv.end(), arg) != c.argv.end();
}

TEST(ControlPlaneComponentsTest, StartOrderBinariesAndLogs) {
  auto all = ControlPlaneComponents(Layout());
  std::vector<std::string> names;
  for (const auto& c : all) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler",
                                             "node-agent"}));
  EXPECT_EQ(all[0].argv[0], "/b/etcd");
  EXPECT_EQ(all[1].argv[0], "/b/kube-apiserver");
  EXPECT_EQ(all[4].argv[0], "/bin/modelfleet-local");
  EXPECT_EQ(all[4].argv[1], "node-agent");
  for (const auto& c : all) EXPECT_EQ(c.log_path, "/d/logs/" + c.name + ".log");
}

TEST(ControlPlaneComponentsTest, ApiServerIsSecuredAsInProduction) {
  auto all = ControlPlaneComponents(Layout());
  const ComponentSpec& api = Find(all, "kube-apiserver");
  for (const char* flag : {"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
                           "--client-ca-file=/d/pki/ca.crt", "--tls-cert-file=/d/pki/apiserver.crt",
                           "--service-account-signing-key-file=/d/pki/sa.key", "--audit-log-path=/d/logs/audit.log",
                           "--audit-policy-file=/d/audit-policy.yaml", "--kubelet-certificate-authority=/d/pki/ca.crt",
                           "--etcd-servers=http://127.0.0.1:2379", "--service-cluster-ip-range=10.96.0.0/16"}) {
    EXPECT_TRUE(Has(api, flag)) << flag;
  }
  // Endpoints refuse loopback addresses: the advertised address is the node's private one.
  EXPECT_TRUE(Has(api, "--advertise-address=10.244.0.1"));
}

TEST(ControlPlaneComponentsTest, EtcdListensOnlyOnLoopback) {
  const auto all = ControlPlaneComponents(Layout());
  const ComponentSpec& etcd = Find(all, "etcd");
  for (const auto& arg : etcd.argv) {
    if (arg.rfind("--listen-", 0) == 0 && arg != "--listen-metrics-urls=") {
      EXPECT_NE(arg.find("://127.0.0.1:"), std::string::npos) << arg;
    }
  }
  EXPECT_TRUE(Has(etcd, "--data-dir=/d/etcd"));
}

TEST(ControlPlaneComponentsTest, ControllersUseTheirOwnIdentities) {
  auto all = ControlPlaneComponents(Layout());
  EXPECT_TRUE(
      Has(Find(all, "kube-controller-manager"), "--kubeconfig=/d/kubeconfigs/kube-controller-manager.kubeconfig"));
  EXPECT_TRUE(Has(Find(all, "kube-controller-manager"), "--use-service-account-credentials=true"));
  EXPECT_TRUE(Has(Find(all, "kube-scheduler"), "--kubeconfig=/d/kubeconfigs/kube-scheduler.kubeconfig"));
  const ComponentSpec& agent = Find(all, "node-agent");
  EXPECT_TRUE(Has(agent, "--kubeconfig=/d/kubeconfigs/node.kubeconfig"));
  EXPECT_TRUE(Has(agent, "--extended-resources=example.com/fpga=1,nvidia.com/gpu=4"));
}

TEST(ControlPlaneComponentsTest, AuditPolicyLogsWritesAndSkipsReads) {
  const std::string policy = AuditPolicyYaml();
  EXPECT_NE(policy.find("kind: Policy"), std::string::npos);
  // Workloads' ServiceAccounts come first: everything they call, reads included, is logged.
  EXPECT_LT(policy.find("userGroups: [system:serviceaccounts]"), policy.find("verbs: [get, list, watch]"));
  EXPECT_NE(policy.find("verbs: [get, list, watch]"), std::string::npos);
  EXPECT_NE(policy.rfind("- level: Metadata"), std::string::npos);
}

}  // namespace
}  // namespace mf::local
