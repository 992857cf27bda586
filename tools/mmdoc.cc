// mmdoc: the command-line tool. `mmdoc COMMAND DB [args]`; `mmdoc --help`
// lists the commands and `mmdoc COMMAND --help` explains one. This file
// only parses the command line (CLI11); tools/commands.cc does the work.
#include <bson/bson.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "tools/commands.h"
#include "tools/open_db.h"
#include "tools/tool_util.h"

namespace mmdoc::tool {
namespace {

constexpr const char* kFooter =
    R"(Documents are JSON (MongoDB relaxed or canonical Extended JSON) on input and
Extended JSON on output, one document per line: relaxed (readable; an int64
may read back as int32) or, with --json-mode canonical, canonical (reads back
as exactly the same BSON). Every command but serve takes -c COLL (default:
the collection named "default"); check and compact always cover the whole
database, and with -c they first require that collection to exist.

Exit status: 0 success; 1 not found (get, index drop, or export, stats,
check or compact -c of a missing collection), a failed check, or a salvage
that could not read everything; 2 bad input, bad usage, or any other error.
Errors are one line on stderr: "mmdoc: <what>: <detail>". A write that
committed but whose database could not close after it (a full disk) exits
0: the change is made; "mmdoc: warning: close: ..." says what failed.

Examples:
  echo '{"_id": 1, "name": "ada"}' | mmdoc insert app.mmdb --echo
  mmdoc get app.mmdb 1
  mmdoc find app.mmdb '{"age": {"$gt": 30}}' --sort=-age --limit 10
  mmdoc index create app.mmdb email --unique
  mmdoc export app.mmdb --format bson -o dump.bson && mmdoc import copy.mmdb dump.bson
)";

constexpr const char* kFilterHelp = "MongoDB filter (the operators: see mmdoc find --help)";

const std::vector<std::string> kCommands = {"insert", "get",      "find",    "update", "delete",
                                            "count",  "distinct", "index",   "import", "export",
                                            "stats",  "check",    "compact", "serve"};
const std::vector<std::string> kIndexCommands = {"create", "drop", "list"};

// A count of at least 1 (CLI11's PositiveNumber said "0 not in range 0 to
// 1.8e308" and let 2^64 through): whole digits, up to INT64_MAX.
const CLI::Validator kAtLeastOne(
    [](std::string& s) -> std::string {
      const bool digits =
          !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos;
      const uint64_t v = digits ? std::strtoull(s.c_str(), nullptr, 10) : 0;
      if (!digits || v == 0 || v > static_cast<uint64_t>(INT64_MAX)) {
        return "must be a whole number from 1 to 9223372036854775807, not '" + s + "'";
      }
      return "";
    },
    "N>=1");

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  for (const std::string& x : v) {
    if (x == s) return true;
  }
  return false;
}

// Every command's -c, to tell after parsing whether one was given.
std::vector<CLI::Option*> collection_options;

// Adds --json-mode to a command that prints documents.
void AddJsonMode(CLI::App* cmd, std::string* mode) {
  cmd->add_option("--json-mode", *mode,
                  "Extended JSON mode: relaxed (plain numbers and ISO dates; an int64 may read "
                  "back as int32) or canonical (types kept: {\"$numberLong\": \"5\"}; reads "
                  "back as exactly the same BSON), as mongoexport --jsonFormat")
      ->capture_default_str()
      ->check(CLI::IsMember({"relaxed", "canonical"}));
}

// Adds --wait: how long to wait for a database another process holds.
void AddWait(CLI::App* cmd, CommonArgs* c) {
  cmd->add_option("--wait", c->wait_seconds,
                  "Wait up to SECONDS for a database that another process holds open, "
                  "instead of failing at once (a writer holds a database alone; readers share it; "
                  "Options::lock_timeout_ms)")
      ->type_name("SECONDS")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            // (CLI::Range lets NaN through: no comparison with it is true.)
            const double s = std::strtod(v.c_str(), nullptr);
            return s >= 0 && s <= 86400 ? "" : "must be a number of seconds from 0 to 86400";
          },
          "0..86400"));
}

// Adds DB, -c and --durability to a command.
void AddCommon(CLI::App* cmd, CommonArgs* c) {
  cmd->add_option("DB", c->db, "Database file")->required();
  collection_options.push_back(
      cmd->add_option("-c,--collection", c->collection, "Collection")->capture_default_str());
  cmd->add_option("--durability", c->durability,
                  "What each commit waits for: none, periodic, msync, fsync or group")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "periodic", "msync", "fsync", "group"}));
  cmd->add_flag("--accept-log-loss", c->accept_log_loss,
                "Open a database that was not closed cleanly although its log is missing, "
                "another database's, damaged or an older copy: at its last checkpoint plus "
                "what the log still holds (the rest is lost)");
  AddWait(cmd, c);
  cmd->add_option("--write-buffer-mib", c->write_buffer_mib,
                  "Keep up to N MiB of commits in memory and merge them into the file in the "
                  "background (Options::write_buffer_size; 0: every commit writes its pages, "
                  "no background thread)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 20));
}

int Main(int argc, char** argv) {
  // Name an unknown command as such (CLI11 would call it an unexpected
  // argument).
  if (argc >= 2 && argv[1][0] != '-' && !Contains(kCommands, argv[1])) {
    return Fail(kExitBadInput, "unknown command", std::string(argv[1]) + " (see mmdoc --help)");
  }
  if (argc >= 3 && std::string(argv[1]) == "index" && argv[2][0] != '-' &&
      !Contains(kIndexCommands, argv[2])) {
    return Fail(kExitBadInput, "unknown command",
                "index " + std::string(argv[2]) + " (see mmdoc index --help)");
  }

  CLI::App app{"mmdoc: an embedded document store. Usage: mmdoc COMMAND DB [args]", "mmdoc"};
  app.require_subcommand(1);
  app.footer(kFooter);
  app.set_version_flag("--version", std::string("mmdoc ") + MMDOC_VERSION,
                       "Print \"mmdoc <version>\" and exit");

  CommonArgs c;

  InsertArgs insert_args;
  CLI::App* insert = app.add_subcommand("insert",
                                        "Insert JSON documents read from stdin, one per line. "
                                        "Each line (or each --batch "
                                        "lines) is one transaction. On invalid JSON or a "
                                        "duplicate on line K, the lines before "
                                        "K are committed and nothing after; exit 2.");
  AddCommon(insert, &c);
  insert->add_option("--batch", insert_args.batch, "Lines per transaction")
      ->capture_default_str()
      ->check(kAtLeastOne);
  insert->add_flag("--echo", insert_args.echo,
                   "Print each inserted _id as JSON on stdout, flushed as soon "
                   "as the commit "
                   "holding it has returned (durable as --durability says)");

  std::string id;
  std::string get_json_mode = "relaxed";
  CLI::App* get = app.add_subcommand("get",
                                     "Print the document with this _id as one line of "
                                     "JSON; exit 1 when there is none.");
  AddCommon(get, &c);
  get->add_option("ID", id,
                  "The _id as JSON: '\"abc\"', 42, '{\"$oid\": \"...\"}'; a "
                  "bare word that is "
                  "not JSON is taken as a string")
      ->required();
  AddJsonMode(get, &get_json_mode);

  FindArgs find_args;
  CLI::App* find = app.add_subcommand("find", "Print the documents matching FILTER, one per line.");
  AddCommon(find, &c);
  // The operators engine/filter.cc parses, no more and no fewer.
  find->add_option("FILTER", find_args.filter,
                   "MongoDB filter: {field: value} (equality), $eq, $ne, $gt, "
                   "$gte, $lt, $lte, $in, $nin, $exists, $regex ($options "
                   "imsxu; PCRE2), $elemMatch, $size, $all, $type, $not, $mod, "
                   "and $and, $or, $nor over filters; not supported (refused, "
                   "exit 2): $expr, $text, $where, $jsonSchema, $bits*, geo")
      ->capture_default_str();
  find->add_option("--sort", find_args.sort,
                   "Sort by FIELD; descending with --sort -FIELD, "
                   "--sort=-FIELD or --sort FIELD:-1; by several keys, the first "
                   "most significant, with --sort a,-b");
  // As text: CLI11 would saturate an out-of-range number and read a
  // leading 0 as octal; ParseInt64 below refuses both.
  std::string limit = "0";
  std::string skip = "0";
  find->add_option("--limit", limit, "Print at most N documents (0: all)")->type_name("N");
  find->add_option("--skip", skip, "Skip the first N matches")->type_name("N");
  std::string max_sort_bytes = std::to_string(find_args.max_sort_bytes);
  find->add_option("--max-sort-bytes", max_sort_bytes,
                   "The most bytes a sort no index gives may hold in memory (0: no limit); "
                   "past it find fails, as MongoDB's 100 MiB limit")
      ->type_name("N")
      ->capture_default_str();
  find->add_option("--project", find_args.project,
                   "Only these fields (and _id): a,b,c; or all but these: --project=-a,-b "
                   "(MongoDB's {a: 0}); -_id drops _id from either")
      ->delimiter(',')
      ->allow_extra_args(false)  // one value per --project: a FILTER after it stays FILTER
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  find->add_flag("--explain", find_args.explain,
                 "Print the plan (index or full scan, keys and documents "
                 "examined) as JSON "
                 "instead of the documents");
  AddJsonMode(find, &find_args.json_mode);

  std::string filter = "{}";
  std::string update_doc;
  bool many = false;
  bool upsert = false;
  CLI::App* update = app.add_subcommand(
      "update",
      "Apply UPDATE (MongoDB's operators: $set $unset $inc $mul $min $max $rename "
      "$currentDate $setOnInsert $push $addToSet $pop $pull $pullAll and the positional $; "
      "or a replacement document) to the first (or, with --many, every) document matching "
      "FILTER; print the counts. Not supported: $bit, $[] and $[<identifier>].");
  AddCommon(update, &c);
  update->add_option("FILTER", filter, kFilterHelp)->required();
  update->add_option("UPDATE", update_doc, "Update document")->required();
  update->add_flag("--many", many, "Update every matching document");
  update->add_flag("--upsert", upsert,
                   "When nothing matches, insert the filter's equality fields with UPDATE "
                   "applied ($setOnInsert included); print its _id as \"upserted\"");

  CLI::App* del = app.add_subcommand("delete",
                                     "Delete the first (or, with --many, every) document "
                                     "matching FILTER; print the count.");
  AddCommon(del, &c);
  del->add_option("FILTER", filter, kFilterHelp)->required();
  del->add_flag("--many", many, "Delete every matching document");

  CLI::App* count =
      app.add_subcommand("count", "Print how many documents match FILTER (default: all).");
  AddCommon(count, &c);
  count->add_option("FILTER", filter, kFilterHelp)->capture_default_str();

  std::string distinct_field;
  std::string distinct_json_mode = "relaxed";
  CLI::App* distinct = app.add_subcommand(
      "distinct",
      "Print the distinct values of FIELD among the documents matching FILTER (default: all), "
      "one JSON value per line in BSON order: an array gives each of its elements, a missing "
      "field nothing, and 1 and 1.0 are one value.");
  AddCommon(distinct, &c);
  distinct->add_option("FIELD", distinct_field, "Dotted field path")->required();
  distinct->add_option("FILTER", filter, kFilterHelp)->capture_default_str();
  AddJsonMode(distinct, &distinct_json_mode);

  std::string field;
  IndexCreateArgs index_args;
  CLI::App* index = app.add_subcommand("index", "Create, drop or list secondary indexes.");
  index->require_subcommand(1);
  CLI::App* index_create = index->add_subcommand(
      "create",
      "Index FIELD, built from the documents already there. FIELD is a dotted path, "
      "several in order for a compound index (a,-b: a ascending, then b descending), "
      "or MongoDB's key pattern as JSON ('{\"a\": 1, \"b\": -1}'). With --unique, "
      "fails (exit 2, naming the value) if two indexed documents share a key.");
  AddCommon(index_create, &c);
  CLI::Option* field_arg =
      index_create->add_option("FIELD", index_args.keys, "a.b, a,-b or {\"a\": 1, \"b\": -1}");
  index_create->add_option("--fields", index_args.keys, "The same as FIELD")->excludes(field_arg);
  index_create->add_flag("--unique", index_args.unique, "Reject duplicate keys");
  index_create->add_flag("--sparse", index_args.sparse,
                         "Leave out documents that have none of the fields");
  index_create
      ->add_option("--partial", index_args.partial,
                   "Index only documents matching this filter (MongoDB's "
                   "partialFilterExpression: equality, $exists: true, $gt $gte $lt "
                   "$lte, $type, $and)")
      ->check(CLI::Validator(
          [](std::string& v) { return v.empty() ? std::string("needs a filter document") : ""; },
          "FILTER"));
  CLI::App* index_drop =
      index->add_subcommand("drop", "Drop the index named FIELD (or on that key pattern).");
  AddCommon(index_drop, &c);
  index_drop->add_option("FIELD", field, "Index name, dotted path or key pattern")->required();
  CLI::App* index_list = index->add_subcommand(
      "list", "List the indexes as JSON lines (field: the name, key, unique, entries).");
  AddCommon(index_list, &c);

  ImportArgs import_args;
  bool no_progress = false;
  CLI::App* import =
      app.add_subcommand("import",
                         "Insert the documents of FILE: JSON documents one after another (one "
                         "per line as mongoexport writes, or pretty-printed over many lines), a "
                         "JSON array of documents (as mongoexport --jsonArray writes; found by "
                         "its '['), or concatenated BSON (as mongodump writes; by a .bson "
                         "extension or by content). A UTF-8 byte order mark is skipped. On a bad "
                         "document K (exit 2) the documents before K are committed and nothing "
                         "after.");
  AddCommon(import, &c);
  import
      ->add_option("FILE", import_args.file,
                   "File to read; - reads standard input (a pipe or FIFO is copied to a temporary "
                   "file first)")
      ->required();
  import->add_option("--format", import_args.format, "auto, json or bson")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "json", "bson"}));
  import->add_flag("--json-array,--jsonArray", import_args.json_array,
                   "FILE must be one JSON array of documents (an array is also read without "
                   "this flag)");
  import->add_option("--batch", import_args.batch, "Documents per transaction")
      ->capture_default_str()
      ->check(kAtLeastOne);
  import->add_flag("--no-progress", no_progress, "No progress bar (shown only on a terminal)");

  ExportArgs export_args;
  CLI::App* exp = app.add_subcommand("export",
                                     "Write a collection as JSON lines (for "
                                     "mongoimport) or concatenated BSON (for "
                                     "mongorestore and bsondump).");
  AddCommon(exp, &c);
  exp->add_option("--format", export_args.format, "json or bson")
      ->capture_default_str()
      ->check(CLI::IsMember({"json", "bson"}));
  exp->add_option("-o,--output", export_args.output, "Output file (default: stdout)");
  AddJsonMode(exp, &export_args.json_mode);
  exp->add_flag("--salvage", export_args.salvage,
                "Read every intact document of the collection from a damaged file "
                "(DB::Salvage: a walk of its _id tree that skips damaged pages); say on "
                "stderr how many could not be read (exit 1 if any, or if a damaged "
                "page was met). The file must still open: a file neither of whose meta "
                "pages is valid is an error (exit 2)");
  exp->add_flag("--no-progress", no_progress, "No progress bar (shown only on a terminal)");

  bool json = false;
  CLI::App* stats = app.add_subcommand("stats",
                                       "Print collections, document counts, index sizes, "
                                       "file size, free pages and fill factor; with -c, "
                                       "only that collection (exit 1 when there is none).");
  AddCommon(stats, &c);
  stats->add_flag("--json", json, "As one JSON object");

  CLI::App* check = app.add_subcommand("check",
                                       "Check checksums, tree structure, indexes against "
                                       "documents and page accounting; exit 0 "
                                       "when consistent, 1 with a list of problems.");
  AddCommon(check, &c);

  CLI::App* compact = app.add_subcommand("compact",
                                         "Rewrite the database into a compact copy and swap it "
                                         "in; the file shrinks.");
  AddCommon(compact, &c);

  ServeArgs serve_args;
  CLI::App* serve = app.add_subcommand(
      "serve",
      "Serve DB over MongoDB's wire protocol (OP_MSG) to MongoDB drivers and tools until "
      "SIGTERM or SIGINT, which close it cleanly. MongoDB collection COLL of database D is "
      "the collection \"D.COLL\" here (mmdoc find DB -c D.COLL reads it). Writes run at "
      "--durability; a write with j: true waits for a durable (group) commit. Supported "
      "commands: docs/server.md.");
  serve->add_option("DB", c.db, "Database file (created when missing)")->required();
  std::string serve_durability = "periodic";
  serve
      ->add_option("--durability", serve_durability,
                   "What a write without j: true waits for: none, periodic (as MongoDB's "
                   "100 ms journal), msync, fsync or group")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "periodic", "msync", "fsync", "group"}));
  serve->add_flag("--accept-log-loss", c.accept_log_loss,
                  "Open a database not closed cleanly whose log is lost (see mmdoc --help)");
  AddWait(serve, &c);
  serve
      ->add_option("--bind", serve_args.bind,
                   "Address to listen on (0.0.0.0 or :: for every interface: no "
                   "authentication, so only on a trusted network)")
      ->capture_default_str();
  serve->add_option("--port", serve_args.port, "TCP port; 0 picks a free one (printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve
      ->add_option("--max-connections", serve_args.max_connections,
                   "Connections served at once; more are closed at once")
      ->capture_default_str()
      ->check(kAtLeastOne);
  serve
      ->add_option("--max-cursors", serve_args.max_cursors,
                   "Open server-side cursors at most (each holds a read snapshot)")
      ->capture_default_str()
      ->check(kAtLeastOne);
  serve
      ->add_option("--cursor-timeout-ms", serve_args.cursor_timeout_ms,
                   "Close a cursor left idle this long")
      ->capture_default_str()
      ->check(kAtLeastOne);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --help-all
    std::string what = "usage";
    if (argc >= 2 && Contains(kCommands, argv[1])) what = std::string(argv[1]) + ": usage";
    return Fail(kExitBadInput, what, std::string(e.what()) + " (see --help)");
  }

  for (const CLI::Option* o : collection_options)
    c.collection_given = c.collection_given || o->count() > 0;
  // Bad input for every command alike (stats and export said "no
  // collection", exit 1; insert with no input exited 0).
  if (c.collection_given && c.collection.empty()) {
    return Fail(kExitBadInput, "-c", "collection name must not be empty");
  }
  // The library's other rules for a name, said of -c before any input is
  // read (insert blamed its first line).
  if (c.collection.size() > 200) {
    return Fail(kExitBadInput, "-c", "collection name longer than 200 bytes");
  }
  if (!bson_utf8_validate(c.collection.data(), c.collection.size(), false)) {
    return Fail(kExitBadInput, "-c", "collection name is not valid UTF-8");
  }
  import_args.progress = !no_progress;
  export_args.progress = !no_progress;
  if (insert->parsed()) return RunInsert(c, insert_args);
  if (get->parsed()) return RunGet(c, id, get_json_mode);
  if (find->parsed()) {
    for (const auto& [name, text, value] :
         {std::tuple{"--limit", &limit, &find_args.limit},
          std::tuple{"--skip", &skip, &find_args.skip},
          std::tuple{"--max-sort-bytes", &max_sort_bytes, &find_args.max_sort_bytes}}) {
      if (!ParseInt64(*text, value)) {
        return Fail(kExitBadInput, "find",
                    std::string(name) +
                        " must be a whole number up to 9223372036854775807, "
                        "got \"" +
                        *text + "\"");
      }
    }
    return RunFind(c, find_args);
  }
  if (update->parsed()) return RunUpdate(c, filter, update_doc, many, upsert);
  if (del->parsed()) return RunDelete(c, filter, many);
  if (count->parsed()) return RunCount(c, filter);
  if (distinct->parsed()) return RunDistinct(c, distinct_field, filter, distinct_json_mode);
  if (index_create->parsed()) return RunIndexCreate(c, index_args);
  if (index_drop->parsed()) return RunIndexDrop(c, field);
  if (index_list->parsed()) return RunIndexList(c);
  if (import->parsed()) return RunImport(c, import_args);
  if (exp->parsed()) return RunExport(c, export_args);
  if (stats->parsed()) return RunStats(c, json);
  if (check->parsed()) return RunCheck(c);
  if (compact->parsed()) return RunCompact(c);
  if (serve->parsed()) {
    c.durability = serve_durability;
    return RunServe(c, serve_args);
  }
  return Fail(kExitBadInput, "usage", "no command (see mmdoc --help)");
}

// libbson aborts when an allocation fails, so under a memory limit a
// document parsed at the wrong moment ended the tool with SIGABRT and no
// message. The tool's allocator for libbson reports it as the one line and
// exit status that main gives std::bad_alloc, and exits at once: every
// commit already reported is in the log, as it would be after a kill.
// What main says of std::bad_alloc too; written here without allocating.
constexpr char kOutOfMemory[] = "out of memory";
constexpr char kOutOfMemoryDetail[] = "what was committed before it stays (see mmdoc check)";

[[noreturn]] void LibbsonOutOfMemory() {
  std::fflush(stdout);  // the answers already given (insert --echo)
  for (const char* part : {"mmdoc: ", kOutOfMemory, ": ", kOutOfMemoryDetail, "\n"}) {
    const ssize_t unused = ::write(STDERR_FILENO, part, std::strlen(part));
    (void)unused;
  }
  std::_Exit(kExitBadInput);
}

void* BsonMalloc(size_t n) {
  void* p = std::malloc(n);
  if (p == nullptr && n != 0) LibbsonOutOfMemory();
  return p;
}

void* BsonCalloc(size_t count, size_t n) {
  void* p = std::calloc(count, n);
  if (p == nullptr && count != 0 && n != 0) LibbsonOutOfMemory();
  return p;
}

void* BsonRealloc(void* mem, size_t n) {
  void* p = std::realloc(mem, n);
  if (p == nullptr && n != 0) LibbsonOutOfMemory();
  return p;
}

void* BsonAlignedAlloc(size_t alignment, size_t n) {
  void* p = nullptr;
  if (posix_memalign(&p, std::max(alignment, sizeof(void*)), n) != 0) LibbsonOutOfMemory();
  return p;
}

void UseReportingAllocatorForLibbson() {
  bson_mem_vtable_t v = {};
  v.malloc = BsonMalloc;
  v.calloc = BsonCalloc;
  v.realloc = BsonRealloc;
  v.free = std::free;
  v.aligned_alloc = BsonAlignedAlloc;
  bson_mem_set_vtable(&v);
}

}  // namespace
}  // namespace mmdoc::tool

int main(int argc, char** argv) {
  mmdoc::tool::ClaimStdio();
  mmdoc::tool::UseReportingAllocatorForLibbson();
  // Past a file size limit (ulimit -f) a write then fails with EFBIG, an
  // error the command reports, instead of SIGXFSZ ending the tool unseen.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    int code = mmdoc::tool::Main(argc, argv);
    if (code != mmdoc::tool::kExitOk) mmdoc::tool::RemoveMadeIfEmpty();
    // Output still buffered when the command ended: a full disk or a closed
    // pipe shows only here, and the answer it lost is a failure too.
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      const int e = errno;
      if (code != mmdoc::tool::kExitBadInput) {
        std::string why = e != 0 ? std::strerror(e) : "write error";
        if (mmdoc::tool::Committed()) why += " (the changes are committed: do not make them again)";
        code = mmdoc::tool::Fail(mmdoc::tool::kExitBadInput, "writing the output", why);
      }
    }
    return code;
  } catch (const std::bad_alloc&) {
    return mmdoc::tool::Fail(mmdoc::tool::kExitBadInput, mmdoc::tool::kOutOfMemory,
                             mmdoc::tool::kOutOfMemoryDetail);
  } catch (const std::exception& e) {
    return mmdoc::tool::Fail(mmdoc::tool::kExitBadInput, "internal error", e.what());
  } catch (...) {
    return mmdoc::tool::Fail(mmdoc::tool::kExitBadInput, "internal error", "unknown exception");
  }
}
