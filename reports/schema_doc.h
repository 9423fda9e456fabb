// The field tables of docs/report-schema.md, generated from the field lists (reports/fields.h)
// of every struct written to results.jsonl, run_meta.json and report.json. The doc holds them
// between kSchemaDocBegin and kSchemaDocEnd; report_tests checks that they match (and rewrites
// them with EARS_UPDATE_DOCS=1). Torch-free.
#pragma once
#include <string>
#include <vector>

namespace ears {

inline constexpr const char* kSchemaDocBegin = "<!-- BEGIN field tables: generated from the field lists in reports/*.h -->";
inline constexpr const char* kSchemaDocEnd = "<!-- END field tables -->";

// One documented field of a struct's field list.
struct SchemaField {
  std::string key;
  std::string type;  // "integer", "number", "[integer]", "[lo, hi]", "object (TimeSplit)", ...
  bool required = false;
  bool derived = false;  // written only
  std::string doc;
};

struct SchemaTable {
  std::string title;  // e.g. "`results.jsonl`: one `RequestResult` per line"
  std::vector<SchemaField> fields;
};

// Every field-listed struct, in document order.
std::vector<SchemaTable> schema_tables();

// The Markdown between the markers (without them): one heading and table per struct.
std::string schema_tables_markdown();

}  // namespace ears
