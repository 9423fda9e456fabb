// docs/report-schema.md against the field lists (reports/schema_doc.h): the generated field
// tables must be the doc's, so a field added to a list but not documented (or documented but
// not in a list) fails here. EARS_UPDATE_DOCS=1 rewrites the tables in the doc.
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "reports/environment_keys.h"
#include "reports/report.h"
#include "reports/schema_doc.h"
#include "tests/test_util.h"

namespace ears {
namespace {

std::string doc_path() { return (test::source_dir() / "docs" / "report-schema.md").string(); }

// The identifier-like strings quoted ("key") in the first ``` block after `heading`; with
// `colon`, only those followed by ':' (keys with a value, not values).
std::set<std::string> quoted_keys_after(const std::string& doc, const std::string& heading, bool colon) {
  std::set<std::string> keys;
  const size_t start = doc.find(heading);
  if (start == std::string::npos) return keys;
  const size_t open = doc.find("```", start);
  const std::string block = doc.substr(open, doc.find("```", open + 3) - open);
  for (size_t q = block.find('"'); q != std::string::npos; q = block.find('"', q + 1)) {
    const size_t end = block.find('"', q + 1);
    if (end == std::string::npos) break;
    const std::string s = block.substr(q + 1, end - q - 1);
    const bool identifier = !s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
    if (identifier && (!colon || block.compare(end + 1, 1, ":") == 0)) keys.insert(s);
    q = end;
  }
  return keys;
}

TEST(SchemaDoc, FieldTablesMatchTheFieldLists) {
  test::expect_generated_block("report-schema.md", kSchemaDocBegin, kSchemaDocEnd, schema_tables_markdown(),
                               "./report_tests --gtest_filter=SchemaDoc.*");
}

TEST(SchemaDoc, EnvironmentTablesMatchTheKeyList) {
  test::expect_generated_block("report-schema.md", kEnvironmentDocBegin, kEnvironmentDocEnd,
                               environment_keys_markdown(), "./report_tests --gtest_filter=SchemaDoc.*");
}

// The hand-written examples of the doc name every field of the lists, and only those.
TEST(SchemaDoc, ExamplesNameEveryField) {
  const std::string doc = test::read_file(doc_path());
  std::set<std::string> result_keys, report_keys;
  for (const auto& t : schema_tables()) {
    for (const auto& f : t.fields) {
      if (t.title.find("results.jsonl") != std::string::npos) result_keys.insert(f.key);
      if (t.title.find("report.json") != std::string::npos || t.title.find("`ArmMetrics`") == 0)
        report_keys.insert(f.key);
    }
  }
  EXPECT_EQ(quoted_keys_after(doc, "## `results.jsonl`", true), result_keys);
  EXPECT_EQ(quoted_keys_after(doc, "## `report.json`", false), report_keys);
}

}  // namespace
}  // namespace ears
