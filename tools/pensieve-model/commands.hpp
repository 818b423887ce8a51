#pragma once
// The subcommands of pensieve-model. Each takes the arguments after its name
// (argv[0] is the subcommand) and returns the process exit code; bad
// arguments print a one-line reason to stderr and return non-zero.

namespace pensieve::tools {

int cmd_inspect(int argc, char** argv);           // inspect_cmd.cpp
int cmd_make_test_model(int argc, char** argv);   // make_test_model_cmd.cpp
int cmd_tokenize(int argc, char** argv);          // tokenize_cmd.cpp
int cmd_detokenize(int argc, char** argv);        // tokenize_cmd.cpp
int cmd_run(int argc, char** argv);               // run_cmd.cpp
int cmd_render_template(int argc, char** argv);   // render_template_cmd.cpp
int cmd_pre_tokenize(int argc, char** argv);      // pre_tokenize_cmd.cpp

}  // namespace pensieve::tools
