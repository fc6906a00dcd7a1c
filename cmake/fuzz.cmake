# libFuzzer targets (QKV_FUZZ=ON, clang; scripts/fuzz.sh): one executable fuzz_<name> per
# tests/fuzz/<name>.cpp, built with QKV_FUZZ_ENTRY so that the file's QKV_FUZZ_TARGET is the
# fuzzer's LLVMFuzzerTestOneInput. The library itself is compiled with -fsanitize=fuzzer-no-link
# (coverage) plus ASan and UBSan (the top-level CMakeLists.txt adds those flags).
# Each target links the lowest layer that holds its parser, so that the cheap ones build (and can
# start fuzzing) long before the whole library has compiled; unlisted targets link everything.
set(fuzz_link_safetensors qkv_io_format)
set(fuzz_link_mo qkv_data)
set(fuzz_link_tokenizer_json qkv_text)
set(fuzz_link_vocab_txt qkv_text)
set(fuzz_link_gpt2_bpe qkv_text)
set(fuzz_link_config_transformer qkv_io)
set(fuzz_link_config_rnn qkv_io)
set(fuzz_link_config_gpt qkv_io)
set(fuzz_link_config_bert qkv_io)
set(fuzz_link_training_state qkv_train)
file(GLOB fuzz_srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/fuzz/*.cpp)
foreach(src ${fuzz_srcs})
  get_filename_component(name ${src} NAME_WE)
  if(name STREQUAL "fuzz_common" OR name MATCHES "^test_")
    continue()
  endif()
  add_executable(fuzz_${name} ${src} ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_common.cpp)
  target_compile_definitions(fuzz_${name} PRIVATE QKV_FUZZ_ENTRY)
  if(DEFINED fuzz_link_${name})
    target_link_libraries(fuzz_${name} PRIVATE ${fuzz_link_${name}})
  else()
    target_link_libraries(fuzz_${name} PRIVATE qkv)
  endif()
  target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
  list(APPEND fuzz_targets fuzz_${name})
endforeach()
# These two write the tests' small random models (tests/common/tiny_models.h) to serve or reload.
foreach(t fuzz_serve_request fuzz_head_config)
  target_include_directories(${t} PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
endforeach()
add_custom_target(qkv_fuzzers DEPENDS ${fuzz_targets})
