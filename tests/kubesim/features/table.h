// Server-side tables (meta.k8s.io/v1 Table), as kube-apiserver answers
// `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` (what `kubectl get` sends): column
// definitions and one row per object with its cells and, per `includeObject`, the object
// (Object), its PartialObjectMetadata (Metadata, the default) or nothing (None).
//
// Columns are the real printers' (k8s.io/kubernetes pkg/printers/internalversion): pods
// (Name Ready Status Restarts Age; priority 1: IP Node "Nominated Node" "Readiness Gates"),
// nodes (Name Status Roles Age Version; priority 1: Internal-IP External-IP OS-Image
// Kernel-Version Container-Runtime), deployments (Name Ready Up-to-date Available Age; priority
// 1: Containers Images Selector), namespaces (Name Status Age), configmaps (Name Data Age),
// secrets (Name Type Data Age), leases (Name Holder Age); custom resources get Name plus their
// CRD's additionalPrinterColumns (JSONPath; default Age), as apiextensions' table convertor.
// CustomResourceDefinitions get apiserver's default convertor (Name, "Created At"); other
// built-in kinds get Name and Age (kube-apiserver has a specific printer for each; kubesim does
// not reproduce those). The server always fills every column; kubectl hides priority > 0
// unless `-o wide`.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "tests/kubesim/store/store.h"

namespace ekco::kubesim::table {

// The Table version ("v1", "v1beta1") an Accept header asks for before any plain JSON type, ""
// for plain objects, nullopt when it accepts nothing kubesim serves (406 Not Acceptable).
std::optional<std::string> wantsTable(std::string_view accept);

// The Table of a list body (kind FooList: its items, resourceVersion and continue) or of one
// object. `include_object`: "None", "Metadata" (also ""), "Object".
nlohmann::json toTable(const ResourceInfo& r, const nlohmann::json& body,
                       std::string_view include_object, std::chrono::system_clock::time_point now,
                       std::string_view version = "v1");

// k8s.io/apimachinery duration.HumanDuration: "45s", "2m5s", "3h", "10d", "2y".
std::string humanDuration(std::chrono::seconds d);

// The Pod STATUS column as kubectl shows it (printPod): phase or reason, Init:N/M, the waiting
// or terminated reason of a container (CrashLoopBackOff, Completed, Error...), Terminating.
std::string podStatus(const nlohmann::json& pod);

}  // namespace ekco::kubesim::table
