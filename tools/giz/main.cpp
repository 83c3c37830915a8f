// giz: the command line of gizml. Subcommands arrive with the modules they reach.
#include <gizml/tensor.h>

#include <iostream>
#include <string>

#include "core/thread_pool.h"
#include "cpu/cpu_info.h"

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

namespace {

int info() {
  std::cout << "gizml 0.1.0\n"
            << "cpu: " << gizml::core::threadCount() << " threads\n"
            << gizml::cpu::cpuReport();
  return 0;
}

int usage() {
  std::cerr << "usage: giz <command>\n\n"
               "commands:\n"
               "  info      what this build and machine offer\n"
               "  template  --template FILE --messages FILE.json [--tools FILE.json] [--var K=V]\n"
               "            render a chat template on a conversation\n"
               "  tokenize  --tokenizer PATH [--special] TEXT | --decode ID...  text <-> token ids\n"
               "  convert   SOURCE DEST [--bits 4 --head-bits 6 --lora DIR]  quantize a model\n"
               "  run       MODEL PROMPT [--max-tokens N --temperature T --seed S ...]  answer a prompt\n"
               "  chat      MODEL [--system TEXT ...]  a conversation, one message per line of stdin\n"
               "  bench     MODEL [--prefill 512 --decode 128 ...]  prefill and decode speed\n"
               "  serve     MODEL... [--host H --port 8080 --slots 4 --context 4096]  the OpenAI API\n"
               "  pull      NAME [--bits 4]  download a model from the Hugging Face hub and convert it\n"
               "  list      [--catalogue]  the models in the cache (name, size, format, bits), or the aliases\n"
               "  rm        NAME  remove a model's download and conversions\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  const std::string command = argv[1];
  try {
    if (command == "info") return info();
    if (command == "convert") return convertCommand(argc, argv);
    if (command == "template") return templateCommand(argc - 2, argv + 2);
    if (command == "tokenize") return tokenizeCommand(argc, argv);
    if (command == "run") return runCommand(argc, argv);
    if (command == "chat") return chatCommand(argc, argv);
    if (command == "bench") return benchCommand(argc, argv);
    if (command == "serve") return serveCommand(argc, argv);
    if (command == "pull") return pullCommand(argc, argv);
    if (command == "list") return listCommand(argc, argv);
    if (command == "rm") return rmCommand(argc, argv);
  } catch (const gizml::Error& e) {
    std::cerr << "giz " << command << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << "giz: unknown command '" << command << "'\n";
  return usage();
}
