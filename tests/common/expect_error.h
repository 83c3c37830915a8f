#pragma once
// Runs a body that must throw gizml::Error with a message naming every given fragment.
#include <gizml/error.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

template <class Body>
void expectError(Body&& body, std::initializer_list<std::string> fragments) {
  try {
    body();
    ADD_FAILURE() << "no gizml::Error thrown";
  } catch (const gizml::Error& e) {
    const std::string message = e.what();
    for (const std::string& fragment : fragments)
      EXPECT_NE(message.find(fragment), std::string::npos) << "message '" << message << "' lacks '" << fragment << "'";
  }
}
