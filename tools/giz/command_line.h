#pragma once
// What every giz command shares on its command line: asking for help, the usage reply, numbers,
// the progress bar, pictures named by a flag.
#include <gizml/image.h>

#include <cstdint>
#include <string>

/// Prints a command's usage: to stdout with status 0 when the user asked for it (--help, giz help
/// COMMAND), else, after a mistake on the command line, to stderr with status 2.
int usageReply(const char* usage, bool asked);

/// True when an argument from argv[first] on is -h or --help.
bool asksHelp(int argc, char** argv, int first);

/// The number `text` given to `flag`, all of it; else an error naming both.
double parseNumber(const std::string& flag, const std::string& text);

/// The whole number `text` given to `flag`; else an error naming both.
int64_t parseCount(const std::string& flag, const std::string& text);

/// An error naming flag and path unless the folder a file at path would go into exists.
void requireOutputFolder(const std::string& flag, const std::string& path);

/// A seed given to `flag`: a whole number from 0; else an error naming both.
uint64_t parseSeed(const std::string& flag, const std::string& text);

/// "label [#####...] 3/8  0.52 s/step" redrawn in place on stderr; a new line once done == total.
void drawProgress(const char* label, int64_t done, int64_t total, double seconds);

/// The bytes of the file a flag names, or an Error naming both.
std::string fileBytes(const std::string& flag, const std::string& path);

/// The picture (PNG or JPEG) of the file `flag` names, or an Error naming both and what is wrong.
gizml::image::Image readPicture(const std::string& flag, const std::string& path);
