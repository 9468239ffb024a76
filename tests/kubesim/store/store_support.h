// Helpers the Store's files share (store.cc, store_resources.cc, store_subresources.cc); not
// part of the Store's interface.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tests/kubesim/store/store.h"

namespace ekco::kubesim::store_detail {

// The string at path ("metadata", "name"), or "" when absent or not a string.
std::string str(const nlohmann::json& obj, std::initializer_list<const char*> path);
// Whether metadata.finalizers is a non-empty array.
bool hasFinalizers(const nlohmann::json& obj);
// The integer metadata.<field>, or fallback.
std::int64_t metaInt(const nlohmann::json& obj, const char* field, std::int64_t fallback);
// The API's 404 NotFound and 409 Conflict ("the object has been modified") for r/name.
Reply notFound(const ResourceInfo& r, const std::string& name);
Reply conflictModified(const ResourceInfo& r, const std::string& name);

// The garbage collector's side of a delete (gc.cc): 422 Invalid for an unknown
// propagationPolicy, and the finalizer the policy asks for (orphan, foregroundDeletion).
std::optional<Reply> invalidPropagation(const DeleteOptions& options);
void applyPropagation(nlohmann::json& object, const DeleteOptions& options);

}  // namespace ekco::kubesim::store_detail
