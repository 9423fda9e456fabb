// Chat templates (qwen3_chat_prompt of decoders/tokenizer.h): the prompt text the model is
// trained to continue, rendered without a template engine.
#include <string>

#include "decoders/tokenizer.h"

namespace ears {

std::string qwen3_chat_prompt(std::string_view user_message, bool thinking) {
  std::string p = "<|im_start|>user\n";
  p += user_message;
  p += "<|im_end|>\n<|im_start|>assistant\n";
  if (!thinking) p += "<think>\n\n</think>\n\n";
  return p;
}

}  // namespace ears
