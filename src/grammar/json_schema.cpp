// JSON grammars: any object, and the values a JSON Schema admits (docs/grammar.md).
#include <gizml/error.h>

#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json_input.h"
#include "grammar/rules.h"

namespace gizml::grammar {
namespace {

using Json = nlohmann::ordered_json;
using Symbol = Builder::Symbol;
using Sequence = Builder::Sequence;

// At most this much whitespace between two tokens, and this many digits in a number's parts,
// so that a model cannot run on in them forever.
constexpr int kMaxSpace = 20;
constexpr int kMaxDigits = 16;
// Schemas inside schemas (items, properties, anyOf, $ref chains) the compiler follows: real ones
// nest a few levels; the bound keeps its recursion shallow whatever the schema.
constexpr int kMaxSchemaDepth = 64;

// The rules every JSON grammar shares, made once each on first use.
class JsonRules {
 public:
  // The string s: ASCII as JSON writes it, every other character as its UTF-8 bytes or as \u
  // escapes (a surrogate pair above U+FFFF), in either case of hex digits.
  Symbol exactString(const std::string& s) {
    Sequence seq = {b_.byte('"')};
    const std::string quoted = Json(s).dump();  // nlohmann keeps non-ASCII as UTF-8
    for (size_t i = 1; i + 1 < quoted.size();) {
      const auto lead = static_cast<unsigned char>(quoted[i]);
      if (lead < 0x80) {
        seq.push_back(b_.byte(lead));
        ++i;
        continue;
      }
      const size_t n = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
      uint32_t cp = lead & (0x7F >> n);
      for (size_t k = 1; k < n; ++k) cp = cp << 6 | (static_cast<unsigned char>(quoted[i + k]) & 0x3F);
      seq.push_back(b_.rule("char", {{b_.literal(quoted.substr(i, n))}, {escapes(cp)}}));
      i += n;
    }
    seq.push_back(b_.byte('"'));
    return b_.rule("const-string", {seq});
  }

  Symbol escapes(uint32_t cp) {
    Sequence seq;
    const auto unit = [&](uint32_t u) {
      seq.push_back(b_.byte('\\'));
      seq.push_back(b_.byte('u'));
      for (int shift = 12; shift >= 0; shift -= 4) {
        const unsigned d = (u >> shift) & 15;
        std::bitset<256> set;
        set.set(d < 10 ? '0' + d : 'a' + d - 10);
        set.set(d < 10 ? '0' + d : 'A' + d - 10);
        seq.push_back(b_.bytes(set));
      }
    };
    if (cp > 0xFFFF) {
      unit(0xD800 + ((cp - 0x10000) >> 10));
      unit(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      unit(cp);
    }
    return b_.rule("escape", {seq});
  }

  explicit JsonRules(Builder& b) : b_(b) {}

  Symbol space() {
    if (space_.rule < 0) {
      std::bitset<256> set;
      for (char c : {' ', '\t', '\n', '\r'}) set.set(static_cast<unsigned char>(c));
      space_ = b_.repeat("space", b_.bytes(set), 0, kMaxSpace);
    }
    return space_;
  }

  // A string's character: an unescaped byte, an escape, or a whole UTF-8 sequence (RFC 3629's
  // table of well-formed sequences, so no overlong forms or surrogates).
  Symbol character() {
    if (char_.rule >= 0) return char_;
    std::bitset<256> plain;
    for (unsigned c = 0x20; c < 0x80; ++c)
      if (c != '"' && c != '\\') plain.set(c);
    std::bitset<256> escaped, hex;
    for (char c : std::string("\"\\/bfnrt")) escaped.set(static_cast<unsigned char>(c));
    for (char c : std::string("0123456789abcdefABCDEF")) hex.set(static_cast<unsigned char>(c));
    const Symbol tail = b_.range(0x80, 0xBF), h = b_.bytes(hex), backslash = b_.byte('\\');
    std::bitset<256> e1c;  // E1-EC, EE-EF
    for (unsigned c = 0xE1; c <= 0xEF; ++c)
      if (c != 0xED) e1c.set(c);
    char_ = b_.rule("char", {{b_.bytes(plain)},
                             {backslash, b_.bytes(escaped)},
                             {backslash, b_.byte('u'), h, h, h, h},
                             {b_.range(0xC2, 0xDF), tail},
                             {b_.byte(0xE0), b_.range(0xA0, 0xBF), tail},
                             {b_.bytes(e1c), tail, tail},
                             {b_.byte(0xED), b_.range(0x80, 0x9F), tail},
                             {b_.byte(0xF0), b_.range(0x90, 0xBF), tail, tail},
                             {b_.range(0xF1, 0xF3), tail, tail, tail},
                             {b_.byte(0xF4), b_.range(0x80, 0x8F), tail, tail}});
    return char_;
  }

  Symbol string(int minLength = 0, int maxLength = -1) {
    const bool plainString = minLength == 0 && maxLength < 0;
    if (plainString && string_.rule >= 0) return string_;
    const Symbol quote = b_.byte('"');
    const Symbol s = b_.rule("string", {{quote, b_.repeat("chars", character(), minLength, maxLength), quote}});
    if (plainString) string_ = s;
    return s;
  }

  Symbol integer() {
    if (integer_.rule < 0) {
      const Symbol digits = b_.repeat("digits", b_.range('0', '9'), 0, kMaxDigits - 1);
      integer_ = b_.rule("integer", {{b_.optional("minus", b_.byte('-')), b_.byte('0')},
                                     {b_.optional("minus", b_.byte('-')), b_.range('1', '9'), digits}});
    }
    return integer_;
  }

  Symbol number() {
    if (number_.rule < 0) {
      std::bitset<256> e, sign;
      e.set('e'), e.set('E'), sign.set('+'), sign.set('-');
      const Symbol fraction = b_.rule("fraction", {{b_.byte('.'), b_.repeat("digits", b_.range('0', '9'), 1, kMaxDigits)}});
      const Symbol exponent = b_.rule("exponent", {{b_.bytes(e), b_.optional("sign", b_.bytes(sign)),
                                                   b_.repeat("digits", b_.range('0', '9'), 1, 3)}});
      number_ = b_.rule("number", {{integer(), b_.optional("fraction?", fraction), b_.optional("exponent?", exponent)}});
    }
    return number_;
  }

  Symbol boolean() {
    if (boolean_.rule < 0) boolean_ = b_.rule("boolean", {{b_.literal("true")}, {b_.literal("false")}});
    return boolean_;
  }
  Symbol null() {
    if (null_.rule < 0) null_ = b_.literal("null");
    return null_;
  }

  // Members "key": value of any keys: `value` each (the object's body between the braces).
  Symbol anyMembers(Symbol value) {
    const Symbol ws = space();
    const Symbol member = b_.rule("member", {{string(), ws, b_.byte(':'), ws, value, ws}});
    const Symbol more = b_.repeat("members", b_.rule("next-member", {{b_.byte(','), ws, member}}), 0, -1);
    return b_.rule("object", {{b_.byte('{'), ws, b_.byte('}')}, {b_.byte('{'), ws, member, more, b_.byte('}')}});
  }

  // "[" items "]" with between min and max items (max < 0: no bound).
  Symbol array(Symbol item, int minItems, int maxItems) {
    const Symbol ws = space();
    const Symbol next = b_.rule("next-item", {{b_.byte(','), ws, item, ws}});
    std::vector<Sequence> alternatives;
    if (minItems == 0) alternatives.push_back({b_.byte('['), ws, b_.byte(']')});
    if (maxItems != 0) {
      const int lo = std::max(minItems, 1) - 1, hi = maxItems < 0 ? -1 : maxItems - 1;
      alternatives.push_back({b_.byte('['), ws, item, ws, b_.repeat("items", next, lo, hi), b_.byte(']')});
    }
    return b_.rule("array", alternatives);
  }

  // Any JSON value.
  Symbol value() {
    if (value_.rule >= 0) return value_;
    value_ = b_.declare("value");
    const Symbol object = anyMembers(value_), list = array(value_, 0, -1);
    b_.define(value_, {{object}, {list}, {string()}, {number()}, {boolean()}, {null()}});
    return value_;
  }

  // Exactly the JSON value v (const, enum), with whitespace between tokens; its strings' other
  // characters also as \u escapes (as json.dumps' ensure_ascii writes them).
  Symbol exact(const Json& v) {
    const Symbol ws = space();
    if (v.is_object() || v.is_array()) {
      Sequence seq = {b_.byte(v.is_object() ? '{' : '['), ws};
      size_t i = 0;
      for (const auto& [key, item] : v.items()) {
        if (i++) seq.insert(seq.end(), {b_.byte(','), ws});
        if (v.is_object()) seq.insert(seq.end(), {exactString(key), ws, b_.byte(':'), ws});
        seq.insert(seq.end(), {exact(item), ws});
      }
      seq.push_back(b_.byte(v.is_object() ? '}' : ']'));
      return b_.rule(v.is_object() ? "const-object" : "const-array", {seq});
    }
    return v.is_string() ? exactString(v.get<std::string>()) : b_.literal(v.dump());
  }

  Builder& builder() { return b_; }

 private:
  Builder& b_;
  Symbol space_, char_, string_, integer_, number_, boolean_, null_, value_;
};

// The keywords that only describe (annotations): allowed, without effect on the text.
const std::set<std::string>& annotations() {
  static const std::set<std::string> words = {"title", "description", "default", "examples", "$schema", "$id",
                                              "$comment", "format", "deprecated", "readOnly", "writeOnly", "$defs",
                                              "definitions"};
  return words;
}

class SchemaCompiler {
 public:
  SchemaCompiler(Builder& b, const Json& root) : j_(b), b_(b), root_(root) {}

  JsonRules& json() { return j_; }

  Symbol compile(const Json& s, const std::string& path) {
    const Nesting nesting(depth_, path);
    if (s.is_boolean()) {
      check(s.get<bool>(), "grammar: the schema at " + path + " is false: it admits no value");
      return j_.value();
    }
    check(s.is_object(), "grammar: the schema at " + path + " is " + std::string(s.type_name()) +
                             ", expected an object or a boolean");
    for (const auto& [key, v] : s.items())
      check(annotations().count(key) || handled().count(key),
            "grammar: the schema keyword \"" + key + "\" at " + path + " is not supported");
    if (s.contains("$ref")) return reference(s.at("$ref"), path);
    if (s.contains("const")) return j_.exact(s.at("const"));
    if (s.contains("enum")) {
      const Json& e = s.at("enum");
      check(e.is_array() && !e.empty(), "grammar: enum at " + path + " must be a non-empty array");
      std::vector<Sequence> alternatives;
      for (const Json& v : e) alternatives.push_back({j_.exact(v)});
      return b_.rule("enum", alternatives);
    }
    for (const char* k : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(k)) continue;
      const Json& list = s.at(k);
      check(list.is_array() && !list.empty(), "grammar: " + std::string(k) + " at " + path + " must be a non-empty array");
      check(std::string(k) != "allOf" || list.size() == 1,
            "grammar: allOf of more than one schema at " + path + " is not supported");
      std::vector<Sequence> alternatives;
      for (size_t i = 0; i < list.size(); ++i)
        alternatives.push_back({compile(list[i], path + "/" + k + "/" + std::to_string(i))});
      return b_.rule(k, alternatives);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s.at("type");
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array())
        for (const Json& x : t) {
          check(x.is_string(), "grammar: type at " + path + " must be a string or strings");
          types.push_back(x.get<std::string>());
        }
      else throw Error("grammar: type at " + path + " must be a string or strings");
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      types.push_back("object");
    } else if (s.contains("items")) {
      types.push_back("array");
    } else {
      return j_.value();
    }
    std::vector<Sequence> alternatives;
    for (const std::string& t : types) alternatives.push_back({ofType(s, t, path)});
    return alternatives.size() == 1 ? alternatives[0][0] : b_.rule("types", alternatives);
  }

 private:
  static const std::set<std::string>& handled() {
    static const std::set<std::string> words = {"type", "properties", "required", "additionalProperties", "items",
                                                "minItems", "maxItems", "minLength", "maxLength", "enum", "const",
                                                "anyOf", "oneOf", "allOf", "$ref"};
    return words;
  }

  static int count(const Json& s, const char* key, const std::string& path, int otherwise) {
    if (!s.contains(key)) return otherwise;
    const Json& v = s.at(key);
    check(v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= 1000,
          "grammar: " + std::string(key) + " at " + path + " must be an integer from 0 to 1000");
    return static_cast<int>(v.get<int64_t>());
  }

  Symbol ofType(const Json& s, const std::string& t, const std::string& path) {
    if (t == "string") {
      const int lo = count(s, "minLength", path, 0), hi = count(s, "maxLength", path, -1);
      check(hi < 0 || lo <= hi, "grammar: minLength exceeds maxLength at " + path);
      return j_.string(lo, hi);
    }
    if (t == "integer") return j_.integer();
    if (t == "number") return j_.number();
    if (t == "boolean") return j_.boolean();
    if (t == "null") return j_.null();
    if (t == "array") {
      const int lo = count(s, "minItems", path, 0), hi = count(s, "maxItems", path, -1);
      check(hi < 0 || lo <= hi, "grammar: minItems exceeds maxItems at " + path);
      const Symbol item = s.contains("items") ? compile(s.at("items"), path + "/items") : j_.value();
      return j_.array(item, lo, hi);
    }
    if (t == "object") return object(s, path);
    throw Error("grammar: type \"" + t + "\" at " + path + " is not a JSON Schema type");
  }

  // Listed properties in the schema's order (required ones always, the others optional), then
  // other keys only where additionalProperties allows them.
  Symbol object(const Json& s, const std::string& path) {
    const Json props = s.value("properties", Json::object());
    check(props.is_object(), "grammar: properties at " + path + " must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      check(s.at("required").is_array(), "grammar: required at " + path + " must be an array of names");
      for (const Json& r : s.at("required")) {
        check(r.is_string(), "grammar: required at " + path + " must be an array of names");
        required.insert(r.get<std::string>());
      }
    }
    struct Property {
      std::string name;
      Symbol value;
      bool required;
    };
    std::vector<Property> list;
    for (const auto& [name, sub] : props.items())
      list.push_back({name, compile(sub, path + "/properties/" + name), required.count(name) > 0});
    for (const std::string& r : required)
      if (!props.contains(r)) list.push_back({r, j_.value(), true});
    std::optional<Symbol> extra;
    const Json more = s.value("additionalProperties", Json(props.empty()));
    if (!(more.is_boolean() && !more.get<bool>())) extra = compile(more, path + "/additionalProperties");
    if (list.empty()) return extra ? j_.anyMembers(*extra) : b_.literal("{}");
    const Symbol ws = j_.space();
    std::vector<Symbol> members;
    for (const Property& p : list)
      members.push_back(b_.rule("member", {{j_.exactString(p.name), ws, b_.byte(':'), ws, p.value, ws}}));
    // rest(i, first): the members from i on, `first` when none came before (no comma yet). Built
    // from the last member back, in a loop (a schema may list thousands of properties); the
    // `first` form only up to the first required member, the others only from member 1.
    const size_t n = list.size();
    size_t firstRequired = n;
    for (size_t i = 0; i < n && firstRequired == n; ++i)
      if (list[i].required) firstRequired = i;
    Symbol later, first;  // rest(i + 1, false) and rest(i + 1, true)
    if (!extra) {
      later = first = b_.rule("end", {{}});
    } else {
      const Symbol kv = b_.rule("extra-member", {{j_.string(), ws, b_.byte(':'), ws, *extra, ws}});
      later = b_.repeat("extra-members", b_.rule("next-extra", {{b_.byte(','), ws, kv}}), 0, -1);
      if (firstRequired == n) first = b_.rule("extras", {{}, {kv, later}});
    }
    for (size_t i = n; i-- > 0;) {
      Symbol laterHere, firstHere;
      if (i >= 1) {
        std::vector<Sequence> alternatives = {{b_.byte(','), ws, members[i], later}};
        if (!list[i].required) alternatives.push_back({later});
        laterHere = b_.rule("members", alternatives);
      }
      if (i <= firstRequired) {
        std::vector<Sequence> alternatives = {{members[i], later}};
        if (!list[i].required) alternatives.push_back({first});
        firstHere = b_.rule("members", alternatives);
      }
      later = laterHere;
      first = firstHere;
    }
    return b_.rule("object", {{b_.byte('{'), ws, first, b_.byte('}')}});
  }

  // "#", "#/$defs/Name" or "#/definitions/Name": one rule per target, so recursion works.
  Symbol reference(const Json& ref, const std::string& path) {
    check(ref.is_string(), "grammar: $ref at " + path + " must be a string");
    const std::string r = ref.get<std::string>();
    if (auto it = refs_.find(r); it != refs_.end()) return it->second;
    const Json* target = nullptr;
    if (r == "#") target = &root_;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (r.rfind(p, 0) != 0) continue;
      const std::string group = p.substr(2, p.size() - 3), name = r.substr(p.size());
      if (root_.contains(group) && root_.at(group).contains(name)) target = &root_.at(group).at(name);
    }
    check(target != nullptr, "grammar: $ref \"" + r + "\" at " + path + " is not \"#\" or a $defs/definitions entry");
    const Symbol rule = b_.declare(r);
    refs_[r] = rule;
    b_.define(rule, {{compile(*target, r)}});
    return rule;
  }

  // One level of compile() deeper, refused past kMaxSchemaDepth.
  struct Nesting {
    Nesting(int& depth, const std::string& path) : depth(depth) {
      check(depth < kMaxSchemaDepth, "grammar: the schema at " + path.substr(0, 200) + (path.size() > 200 ? "..." : "") +
                                         " nests deeper than " + std::to_string(kMaxSchemaDepth) + " levels");
      ++depth;
    }
    ~Nesting() { --depth; }
    int& depth;
  };

  JsonRules j_;
  Builder& b_;
  const Json& root_;
  std::map<std::string, Symbol> refs_;
  int depth_ = 0;
};

}  // namespace

Grammar Grammar::anyObject() {
  Builder b;
  JsonRules j(b);
  const Symbol ws = j.space();
  return b.finish(b.rule("root", {{ws, j.anyMembers(j.value()), ws}}));
}

namespace {

Json parseSchema(std::string_view schemaJson) {
  try {
    return parseJson(schemaJson);
  } catch (const Json::exception& e) {  // parse errors, and numbers out of range
    throw Error(std::string("grammar: the schema is not JSON: ") + e.what());
  } catch (const JsonTooDeep& e) {
    throw Error(std::string("grammar: the schema at ") + e.what());
  }
}

}  // namespace

Grammar Grammar::fromSchema(std::string_view schemaJson) {
  const Json schema = parseSchema(schemaJson);
  Builder b;
  SchemaCompiler c(b, schema);
  const Symbol value = c.compile(schema, "#");
  const Symbol ws = c.json().space();
  return b.finish(b.rule("root", {{ws, value, ws}}));
}

Grammar Grammar::tagged(std::string_view schemaJson, std::string_view open, std::string_view close, int most) {
  check(most != 0, "grammar: tagged values need most != 0");
  const Json schema = parseSchema(schemaJson);
  Builder b;
  SchemaCompiler c(b, schema);
  const Symbol ws = c.json().space();
  const Symbol item = b.rule("tagged", {{b.literal(open), c.compile(schema, "#"), b.literal(close), ws}});
  const Symbol more = b.repeat("more", item, 0, most < 0 ? -1 : most - 1);
  return b.finish(b.rule("root", {{ws, item, more}}));
}

}  // namespace gizml::grammar
