// giz: the command line of gizml. Subcommands arrive with the modules they reach.
#include <gizml/cpu.h>
#include <gizml/error.h>
#include <gizml/threads.h>

#include <iomanip>
#include <iostream>
#include <new>
#include <string>

#include "command_line.h"

int convertCommand(int argc, char** argv);   // convert_command.cpp
int templateCommand(int argc, char** argv);  // template_command.cpp
int tokenizeCommand(int argc, char** argv);  // tokenize_command.cpp
int runCommand(int argc, char** argv);       // run_command.cpp
int chatCommand(int argc, char** argv);      // chat_command.cpp
int benchCommand(int argc, char** argv);     // bench.cpp
int serveCommand(int argc, char** argv);     // serve_command.cpp
int pullCommand(int argc, char** argv);      // pull_command.cpp
int listCommand(int argc, char** argv);      // pull_command.cpp
int rmCommand(int argc, char** argv);        // pull_command.cpp
int paintCommand(int argc, char** argv);     // paint_command.cpp
int videoCommand(int argc, char** argv);     // video_command.cpp

namespace {

constexpr const char* kVersion = "gizml 0.1.0";

int info(int argc, char** argv) {
  if (asksHelp(argc, argv, 2)) return usageReply("usage: giz info\n  this build's version, the CPU's threads and ISA, and the kernels chosen\n", true);
  if (argc > 2) return usageReply("usage: giz info\n", false);
  std::cout << kVersion << "\n"
            << "cpu: " << gizml::core::threadCount() << " threads\n"
            << gizml::cpu::cpuReport();
  return 0;
}

struct Command {
  const char* name;
  int (*run)(int argc, char** argv);  // argv[1] is the command's name
  const char* summary;
};

constexpr Command kCommands[] = {
    {"info", info, "what this build and machine offer"},
    {"run", runCommand, "MODEL PROMPT [--max-tokens N --temperature T --seed S ...]  answer a prompt"},
    {"chat", chatCommand, "MODEL [--system TEXT ...]  a conversation, one message per line of stdin"},
    {"serve", serveCommand, "MODEL... [--host H --port 8080 --slots 4 --context 4096]  the OpenAI API"},
    {"paint", paintCommand, "[MODEL] PROMPT [--seed 0 --size 1024x1024 -o image.png]  a picture (Z-Image Turbo)"},
    {"video", videoCommand, "[MODEL] PROMPT [--frames 124 --size 1344x768 --steps 6 -o video.mp4]  video with sound (MiniMax H3)"},
    {"bench", benchCommand, "MODEL [--prefill 512 --decode 128 ...]  prefill and decode speed"},
    {"convert", convertCommand, "SOURCE DEST [--bits 4 --head-bits 6 --lora DIR]  quantize a model"},
    {"template", templateCommand, "--template FILE --messages FILE.json [--tools FILE.json] [--var K=V]\n"
                                  "            render a chat template on a conversation"},
    {"pull", pullCommand, "NAME [--bits 4]  download a model from the Hugging Face hub and convert it"},
    {"list", listCommand, "[--catalogue]  the models in the cache (name, size, format, bits), or the aliases"},
    {"rm", rmCommand, "NAME  remove a model's download and conversions"},
    {"tokenize", tokenizeCommand, "--tokenizer PATH [--special] TEXT | --decode ID...  text <-> token ids"},
};

const Command* find(const std::string& name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

// The list of commands: to stdout with status 0 when asked for, else to stderr with status 2.
int usage(bool asked) {
  std::ostream& out = asked ? std::cout : std::cerr;
  out << "usage: giz <command> [arguments]    (giz <command> --help, or giz help <command>, for one)\n\n"
         "commands:\n";
  for (const Command& c : kCommands) out << "  " << std::left << std::setw(10) << c.name << c.summary << "\n";
  return asked ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(false);
  std::string command = argv[1];
  if (command == "--version" || command == "version") {
    std::cout << kVersion << "\n";
    return 0;
  }
  if (command == "-h" || command == "--help" || (command == "help" && argc == 2)) return usage(true);
  char help[] = "--help";
  char* forwarded[] = {argv[0], argv[argc > 2 ? 2 : 1], help, nullptr};
  if (command == "help") {  // giz help COMMAND is giz COMMAND --help
    command = argv[2];
    if (!find(command)) {
      std::cerr << "giz help: unknown command '" << command << "'\n";
      return usage(false);
    }
    argc = 3;
    argv = forwarded;
  }
  const Command* found = find(command);
  if (!found) {
    std::cerr << "giz: unknown command '" << command << "'\n";
    return usage(false);
  }
  try {
    return found->run(argc, argv);
  } catch (const gizml::Error& e) {
    std::cerr << "giz " << command << ": " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    // A size asked for (a picture, a video, a context) that this machine's memory cannot hold.
    std::cerr << "giz " << command << ": out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    // The standard library's own (a folder that cannot be listed, ...): said, never a crash.
    std::cerr << "giz " << command << ": " << e.what() << "\n";
    return 1;
  }
}
