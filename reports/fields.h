// Field lists: every report struct names each of its JSON fields once, in a static member
//   template <class S, class V> static void fields(S& self, V& v);   // S = T or const T
// that calls, in JSON/schema order,
//   v(key, self.member, "one-line doc", flags);   // one stored field
//   v.derived(key, value, "one-line doc");        // written only (computed from other fields)
// JSON output, JSON input, the non-negativity checks of validate() and the field tables of
// docs/report-schema.md (reports/schema_doc.h) are all derived from these lists
// (reports/field_json.h holds the JSON visitors). Torch-free, JSON-free.
#pragma once

namespace ears {

// Field flags (a bit set). Reading follows the struct's dialect (field_json.h); these refine it.
enum FieldFlag : unsigned {
  kFieldRequired = 1u << 0,     // reading fails when the key is absent
  kFieldOmitEmpty = 1u << 1,    // not written when empty (e.g. output_ids)
  kFieldDeciles = 1u << 2,      // a list of exactly kUncertaintyDeciles entries ([] = all 0)
  kFieldNullIsNaN = 1u << 3,    // a null number reads as NaN, not as the default
  kFieldNonNegative = 1u << 4,  // validate(): a number that must be >= 0 (and not NaN)
  kFieldValue = 1u << 5,        // read as json::value(key, default): a type mismatch (or null)
                                // throws nlohmann's own error (kept for old files' messages)
  kFieldObject = 1u << 6,       // a JSON value written as {} when null
  kFieldVaries = 1u << 7,       // may differ between two runs of the same request (timings, run_id):
                                // duplicate results are compared without it (reports/report.cpp)
};

// True for the structs that carry a field list (nested objects in JSON).
template <class T>
concept FieldListed = requires { typename T::FieldListTag; };

}  // namespace ears
