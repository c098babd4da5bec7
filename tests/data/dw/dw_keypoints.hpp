// The keypoint file the harnesses read (written by their make_*_fixtures.py generators): one
// keypoint per line, seven whitespace-separated numbers x y size angle response octave class_id;
// x..response are float32 values written exactly, octave and class_id integers.
#pragma once

#include <opencv2/core.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

inline std::vector<cv::KeyPoint> read_keypoints(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open keypoint file " + path);
    std::vector<cv::KeyPoint> kps;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        std::istringstream ss(line);
        std::string tok;
        double v[7];
        for (double& x : v) {
            if (!(ss >> tok)) throw std::runtime_error("short keypoint line: " + line);
            char* end = nullptr;
            x = std::strtod(tok.c_str(), &end);
            if (end == tok.c_str() || *end != '\0') throw std::runtime_error("bad number '" + tok + "' in: " + line);
        }
        kps.emplace_back(static_cast<float>(v[0]), static_cast<float>(v[1]), static_cast<float>(v[2]),
                         static_cast<float>(v[3]), static_cast<float>(v[4]), static_cast<int>(v[5]),
                         static_cast<int>(v[6]));
    }
    return kps;
}
